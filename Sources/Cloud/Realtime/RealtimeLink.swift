import AsyncHTTPClient
import BusymateShared
import CaptureStore
import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The tunnel's Realtime client, as the seed's extension keeps one: while
/// paired, a Phoenix socket (`vsn=1.0.0`) to the account's Realtime, with
/// presence on `devices:all` and the dashboard's commands on
/// `device:<uuid>`; beside it, `BreakpointMirror` writes the messages this
/// tunnel holds into the account's `breakpoint_events`.
public actor RealtimeLink {
    public static let devicesTopic = "realtime:devices:all"

    private let tokenURL: URL
    private let commands: any RealtimeCommands
    private let store: StoreHandle?
    private let heartbeat: Duration
    private let group: MultiThreadedEventLoopGroup
    private let client: HTTPClient
    private let logger = Logger(label: "busymate.cloud.realtime")

    private var token: DeviceToken?
    private var tokenProblem: String?
    /// A token the server refused (expired, revoked): not offered again until it changes.
    private var refusedToken: String?
    private var refusedAt = Date.distantPast
    private var state = "off"
    private var backoff = SinkBackoff()
    private var wakes = 0
    private var stopping = false
    private var mode = "proxy"

    // The socket under way: each attempt has a generation, and what an
    // older one (a connect abandoned at its deadline) still says is ignored.
    private var generation = 0
    private var endedGeneration = 0
    /// The token the joined channels hold (joined with, or handed over since).
    private var channelToken: String?
    private var connectedAt: Date?
    private var outgoing: AsyncStream<String>.Continuation?
    private var refs = 0
    private var joinRefs: [String: String] = [:]
    private var joined: Set<String> = []
    private var heartbeatRef: String?
    private var systemErrors: [String: String] = [:]
    /// Why the socket is being closed here (nil: the server or the network closed it).
    private var closing: Closing?
    private var tracks: [Date] = []
    private var trackedMode: String?

    private enum Closing {
        case refused(String)
        case retry(String)
        case reload
    }

    private enum Command: Sendable {
        case breakpoint(requestID: String, rawHTTP: String?, abort: Bool)
        case settings
        case mode(transparent: Bool)
        case unpair
        case resend(requestID: String)
    }

    private let queue: AsyncStream<Command>
    private let queueInput: AsyncStream<Command>.Continuation

    public init(token: URL, store: StoreHandle?, commands: any RealtimeCommands, heartbeat: Duration = .seconds(25)) {
        tokenURL = token
        self.store = store
        self.commands = commands
        self.heartbeat = heartbeat
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        client = HTTPClient(
            eventLoopGroup: group,
            configuration: HTTPClient.Configuration(
                redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(30))))
        (queue, queueInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    }

    // MARK: from the tunnel

    /// `device-jwt.json` changed: a new token on the same account and
    /// device is handed to the joined channels (Realtime's `access_token`);
    /// anything else starts a new socket.
    public func reloadToken() {
        let previous = token
        load()
        wakes += 1
        guard let previous, let token, outgoing != nil else {
            if previous != nil || token != nil { close(.reload) }
            return
        }
        if previous.token == token.token { return }
        // Handed over only to channels that have joined; a join still under way starts again with it.
        if previous.api == token.api, previous.anonKey == token.anonKey, previous.deviceUUID == token.deviceUUID, closing == nil,
            !joinRefs.isEmpty, joined.count == joinRefs.count
        {
            for topic in joined.sorted() {
                send(
                    PhoenixMessage(
                        topic: topic, event: "access_token", payload: PhoenixMessage.json(["access_token": token.token]),
                        ref: nextRef(), joinRef: joinRefs[topic]))
            }
            channelToken = token.token
            logger.info("handed the new device token to the Realtime channels")
        } else {
            close(.reload)
        }
    }

    /// The capture mode, for presence.
    public func setMode(_ mode: String) {
        guard mode != self.mode else { return }
        self.mode = mode
        track()
    }

    /// For `status.json`: connected, connecting, why not.
    public func status() -> String? { token == nil && tokenProblem == nil ? nil : state }

    public func stop() {
        stopping = true
        wakes += 1
        queueInput.finish()
        outgoing?.finish()
    }

    public func shutdown() async {
        try? await client.shutdown()
        try? await group.shutdownGracefully()
    }

    // MARK: the loops

    public func run() async {
        load()
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await self.connectLoop() }
            tasks.addTask { await self.commandLoop() }
            if let store = self.store { tasks.addTask { await BreakpointMirror(store: store).run(self) } }
        }
    }

    private func load() {
        do {
            token = try DeviceToken.read(tokenURL)
            tokenProblem = token.flatMap { DeviceToken.problem(with: $0.token, deviceUUID: $0.deviceUUID) }
        } catch {
            token = nil
            tokenProblem = "\(error)"
        }
        if let tokenProblem {
            token = nil
            state = "off: \(tokenProblem)"
        }
    }

    private func connectLoop() async {
        while !stopping && !Task.isCancelled {
            guard let token else {
                state = tokenProblem.map { "off: \($0)" } ?? "off"
                await pause(5)
                load()
                continue
            }
            // A refused token waits for a new one, and is tried again after five minutes (the server may have been wrong).
            if refusedToken == token.token, Date().timeIntervalSince(refusedAt) < 300 {
                await pause(5)
                continue
            }
            state = "connecting"
            let ended = await connect(token)
            if stopping { break }
            switch ended {
            case let .refused(why)?:
                // The token the channels held last: a refresh may have replaced the one joined with.
                refusedToken = channelToken ?? token.token
                refusedAt = Date()
                state = "refused: \(why)"
                logger.error(
                    "Realtime refuses the device token; the dashboard cannot reach this appliance until it is paired again",
                    metadata: ["ERROR": "\(why)"])
            case .reload?:
                backoff.reset()
            case let .retry(why)?:
                let delay = backoff.next()
                state = "reconnecting in \(Int(delay.rounded(.up))) s: \(why)"
                if backoff.failures <= 1 { logger.warning("the Realtime socket ended; connecting again", metadata: ["ERROR": "\(why)"]) }
                await pause(delay)
            case nil:
                let delay = backoff.next()
                state = "reconnecting in \(Int(delay.rounded(.up))) s"
                await pause(delay)
            }
        }
        state = "off"
    }

    /// One socket, from connecting to its end; says why it ended. A
    /// socket that has not joined within 20 s (a server that accepts and
    /// says nothing) is given up: its attempt may linger until the server
    /// lets go, but what it says no longer counts.
    private func connect(_ token: DeviceToken) async -> Closing? {
        let endpoint: CloudEndpoint
        do {
            endpoint = try CloudEndpoint(token)
        } catch {
            return .refused(error.description)
        }
        let secure = URL(string: endpoint.base)?.scheme?.lowercased() == "https"
        let url = "\(secure ? "wss" : "ws")\(endpoint.base.drop { $0 != ":" })/realtime/v1/websocket?apikey=\(endpoint.anonKey)&vsn=1.0.0"
        let (stream, input) = AsyncStream<String>.makeStream()
        generation += 1
        let id = generation
        outgoing = input
        refs = 0
        joinRefs = [:]
        joined = []
        heartbeatRef = nil
        systemErrors = [:]
        closing = nil
        trackedMode = nil
        connectedAt = nil
        channelToken = token.token
        join(
            Self.devicesTopic,
            config: [
                "broadcast": ["self": false, "ack": false], "presence": ["key": token.deviceUUID, "enabled": true],
                "postgres_changes": [Any](), "private": true,
            ], token: token.token)
        join(
            deviceTopic(token),
            config: [
                "broadcast": ["self": false, "ack": false], "presence": ["key": "", "enabled": false],
                "postgres_changes": [Any](), "private": true,
            ], token: token.token)
        let tls: TLSConfiguration? = secure ? TLSConfiguration.makeClientConfiguration() : nil
        let attempt = Task { await self.runSocket(url: url, tls: tls, stream: stream, id: id) }
        let started = ContinuousClock.now
        while endedGeneration != id && !stopping {
            if joined.count < joinRefs.count, ContinuousClock.now - started > .seconds(20) {
                close(.retry("Realtime did not answer the joins within 20 s"))
                break
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        _ = attempt
        outgoing?.finish()
        outgoing = nil
        joined = []
        // A socket that stayed up a while starts the backoff again; one that
        // joins and is closed at once (a rate limit) does not.
        if let connectedAt, Date().timeIntervalSince(connectedAt) >= 60 { backoff.reset() }
        return closing
    }

    private func runSocket(url: String, tls: TLSConfiguration?, stream: AsyncStream<String>, id: Int) async {
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20, closeTimeout: .seconds(2))
        configuration.sniHostname = nil
        let heartbeat = self.heartbeat
        do {
            try await WebSocketClient.connect(
                url: url, configuration: configuration, tlsConfiguration: tls, eventLoopGroup: group,
                logger: Logger(label: "busymate.cloud.realtime")
            ) { inbound, outbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask {
                        for await text in stream { try await outbound.write(.text(text)) }
                    }
                    tasks.addTask {
                        while !Task.isCancelled {
                            try await Task.sleep(for: heartbeat)
                            guard await self.beat(id) else { return }
                        }
                    }
                    tasks.addTask {
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            if case let .text(text) = message { await self.received(text, id) }
                        }
                    }
                    // The first to end ends the socket.
                    _ = try await tasks.next()
                    tasks.cancelAll()
                }
            }
        } catch {
            if id == generation, closing == nil { closing = .retry(CloudError.describe(error)) }
        }
        if id == generation { endedGeneration = id }
    }

    private func deviceTopic(_ token: DeviceToken) -> String { "realtime:device:\(token.deviceUUID)" }

    private func nextRef() -> String {
        refs += 1
        return "\(refs)"
    }

    private func send(_ message: PhoenixMessage) {
        outgoing?.yield(message.text)
    }

    private func join(_ topic: String, config: [String: Any], token: String) {
        let ref = nextRef()
        joinRefs[topic] = ref
        send(
            PhoenixMessage(
                topic: topic, event: "phx_join", payload: PhoenixMessage.json(["config": config, "access_token": token]), ref: ref,
                joinRef: ref))
    }

    private func close(_ why: Closing) {
        if closing == nil { closing = why }
        outgoing?.finish()
    }

    /// A heartbeat; false when the last one went unanswered (the socket is dead).
    private func beat(_ id: Int) -> Bool {
        guard id == generation else { return false }
        if heartbeatRef != nil {
            close(.retry("no heartbeat reply within \(heartbeat)"))
            return false
        }
        let ref = nextRef()
        heartbeatRef = ref
        send(PhoenixMessage(topic: "phoenix", event: "heartbeat", ref: ref))
        // A track the rate limit held back goes with the heartbeat.
        track()
        return true
    }

    /// Presence on `devices:all`: at join, and when the mode changes; at
    /// most four tracks in 30 s (Realtime closes a channel past five).
    private func track() {
        guard joined.contains(Self.devicesTopic), trackedMode != mode else { return }
        let now = Date()
        tracks.removeAll { now.timeIntervalSince($0) > 30 }
        guard tracks.count < 4 else { return }
        tracks.append(now)
        trackedMode = mode
        let meta: [String: Any] = [
            "source": "tunnel", "vpn_state": mode == "transparent" ? "on" : "off", "online_at": DatabaseDateText.iso8601(now),
        ]
        send(
            PhoenixMessage(
                topic: Self.devicesTopic, event: "presence",
                payload: PhoenixMessage.json(["type": "presence", "event": "track", "payload": meta]),
                ref: nextRef(), joinRef: joinRefs[Self.devicesTopic]))
    }

    private func received(_ text: String, _ id: Int) {
        guard id == generation, let message = PhoenixMessage(text: text) else { return }
        let payload = message.object
        switch message.event {
        case "phx_reply":
            if message.topic == "phoenix" {
                if message.ref == heartbeatRef { heartbeatRef = nil }
                return
            }
            guard let ref = message.ref, joinRefs[message.topic] == ref, !joined.contains(message.topic) else { return }
            if payload["status"] as? String == "ok" {
                joined.insert(message.topic)
                if message.topic == Self.devicesTopic { track() }
                if joined.count == joinRefs.count {
                    state = "connected"
                    connectedAt = Date()
                    logger.info(
                        "joined the account's Realtime channels", metadata: ["TOPICS": "\(joined.sorted().joined(separator: ", "))"])
                }
            } else {
                let reason = ((payload["response"] as? [String: Any])?["reason"] as? String).map(CloudResponse.printable) ?? "refused"
                close(Self.isCredential(reason) ? .refused("join \(message.topic): \(reason)") : .retry("join \(message.topic): \(reason)"))
            }
        case "system":
            if payload["status"] as? String == "error", let text = payload["message"] as? String {
                systemErrors[message.topic] = CloudResponse.printable(text)
            }
        case "phx_close", "phx_error":
            guard joinRefs[message.topic] != nil else { return }
            let reason = systemErrors[message.topic] ?? "the server closed \(message.topic)"
            close(Self.isCredential(reason) ? .refused(reason) : .retry(reason))
        case "broadcast":
            guard let token, message.topic == deviceTopic(token) else { return }
            command(payload["event"] as? String ?? "", payload["payload"] as? [String: Any] ?? [:])
        default:
            break
        }
    }

    /// Realtime's words for a token it will not take.
    static func isCredential(_ reason: String) -> Bool {
        ["expired", "JWT", "Jwt", "Unauthorized", "permission", "Token"].contains { reason.contains($0) }
    }

    private func command(_ event: String, _ payload: [String: Any]) {
        let requestID = (payload["requestId"] as? String) ?? (payload["request_id"] as? String)
        let command: Command
        switch event {
        case "breakpoint-continue":
            guard let requestID else { return ignored(event, "no requestId") }
            command = .breakpoint(requestID: requestID, rawHTTP: payload["rawHttp"] as? String, abort: (payload["abort"] as? Bool) ?? false)
        case "settings-updated": command = .settings
        case "vpn-on": command = .mode(transparent: true)
        case "vpn-off": command = .mode(transparent: false)
        case "unpair": command = .unpair
        case "resend-request":
            guard let requestID else { return ignored(event, "no requestId") }
            command = .resend(requestID: requestID)
        default:
            // The iOS app's own (open-sheet, rename, …): nothing to do here.
            return
        }
        logger.info("the dashboard asks: \(event)", metadata: requestID.map { ["REQUEST_ID": "\($0)"] } ?? [:])
        queueInput.yield(command)
    }

    private func ignored(_ event: String, _ why: String) {
        logger.warning("ignored a Realtime command", metadata: ["EVENT": "\(event)", "WHY": "\(why)"])
    }

    /// Commands one at a time, in the order they came, off the socket's reads.
    private func commandLoop() async {
        for await command in queue {
            let line: String
            switch command {
            case let .breakpoint(requestID, rawHTTP, abort):
                line = await commands.continueBreakpoint(requestID: requestID, rawHTTP: rawHTTP, abort: abort)
            case .settings:
                guard let api = api() else { continue }
                do {
                    line = await commands.mergeSettings(try await api.effectiveSettings())
                } catch {
                    line = "cannot fetch effective_settings_for_device: \(CloudError.describe(error)); settings.json is unchanged"
                }
            case let .mode(transparent):
                line = await commands.setMode(transparent: transparent)
            case .unpair:
                line = await commands.unpair()
            case let .resend(requestID):
                line = await commands.resend(requestID: requestID)
            }
            logger.notice("\(line)")
        }
    }

    private func api() -> CloudAPI? {
        guard let token, let endpoint = try? CloudEndpoint(token) else { return nil }
        return CloudAPI(endpoint: endpoint, deviceUUID: token.deviceUUID, token: token.token, client: client, timeout: .seconds(30))
    }

    // MARK: for the breakpoint mirror

    /// Where the mirror writes now: nil while unpaired or while the token is refused.
    func mirrorTarget() -> CloudAPI? {
        refusedToken != nil && refusedToken == token?.token ? nil : api()
    }

    var isStopping: Bool { stopping }

    /// Sleeps up to `seconds`, less when woken (a token change, a stop).
    func pause(_ seconds: Double) async {
        let woken = wakes
        let until = ContinuousClock.now + .milliseconds(Int(max(0, seconds) * 1000))
        while ContinuousClock.now < until, wakes == woken, !stopping, !Task.isCancelled {
            try? await Task.sleep(for: min(until - ContinuousClock.now, .milliseconds(250)))
        }
    }
}
