import BusymateShared
import CLinux
import Foundation
import Logging

/// `busymate pair` and `busymate unpair`, the supervisor's half: it keeps
/// the token's private copy (the Keychain's counterpart) and its mirror in
/// the group. The calls to the account's API go through a child that has
/// given up root (`busymate-tunnel --cloud-call`): the supervisor reads back
/// only its one checked line.
struct Pairing: Sendable {
    let paths: GroupPaths
    let callExecutable: String
    let identity: TunnelIdentity
    let logger = Logger(label: "busymate.cloud")

    /// What `pair` keeps for the next pairing: the API and its anon key.
    struct CloudConfig: Codable {
        var api: String
        var anonKey: String
        enum CodingKeys: String, CodingKey {
            case api
            case anonKey = "anon_key"
        }
    }

    /// How long the child may take (its own timeouts are 10 s to connect, 30 s to answer).
    static let callDeadline: TimeInterval = 45

    func pair(_ request: PairingRequest) async -> ControlMessage {
        guard request.code.utf8.count <= 128, !request.code.isEmpty, CloudCallResult.isWord(request.code) else {
            return .reply(ok: false, "the pairing code is letters, digits and '-' (as the dashboard shows it)")
        }
        let kept = readCloudConfig()
        guard let api = request.api ?? kept?.api, let anonKey = request.anonKey ?? kept?.anonKey else {
            return .reply(
                ok: false,
                "no API yet: busymate pair CODE --api https://PROJECT.supabase.co --anon-key KEY (both are kept for the next pairing)")
        }
        let deviceUUID: String
        do {
            deviceUUID = try ensureDeviceUUID()
        } catch {
            return .reply(ok: false, "cannot keep this appliance's device uuid in \(paths.privateDirectory.path): \(error)")
        }
        let name = request.name.map(CloudCallResult.printable) ?? Self.hostname()
        let call = CloudCallRequest(
            action: .claim, api: api, anonKey: anonKey, deviceUUID: deviceUUID, code: request.code, name: name,
            model: Self.model(), osVersion: Self.osVersion())
        logger.info(
            "pairing with the account",
            metadata: ["API": "\(URL(string: api)?.host ?? "?")", "DEVICE_UUID": "\(deviceUUID)", "NAME": "\(name)"])
        switch await run(call) {
        case let .claimed(token, jti, expires):
            let record = DeviceToken(
                token: token, jti: jti, expiresAt: Date(timeIntervalSince1970: TimeInterval(expires)), deviceUUID: deviceUUID,
                api: api, anonKey: anonKey, name: name, pairedAt: Date())
            do {
                try writePrivate(try JSONEncoder.cloud.encode(CloudConfig(api: api, anonKey: anonKey)), to: paths.privateCloudConfig)
                let data = try record.encoded()
                try writePrivate(data, to: paths.privateDeviceToken)
                try SecretFiles.writeMirror(data, to: paths.deviceToken, reader: identity.user)
            } catch {
                logger.error("paired, but cannot keep the token", metadata: ["ERROR": "\(error)"])
                return .reply(ok: false, "paired, but cannot keep the token: \(error)")
            }
            let report = CloudReport.make(record, sinks: [])
            logger.notice("paired", metadata: ["DEVICE_UUID": "\(deviceUUID)", "JTI": "\(jti)", "EXPIRES": "\(record.expiresAt)"])
            return .reply(ok: true, "paired as \"\(name)\" (device \(deviceUUID)) with \(URL(string: api)?.host ?? api); \(report.detail)")
        case let .failed(why):
            logger.warning("pairing failed", metadata: ["ERROR": "\(why)"])
            return .reply(ok: false, "pairing failed: \(why)")
        case .done, nil:
            return .reply(ok: false, "pairing failed: the pairing call gave no usable answer")
        }
    }

    func unpair() async -> ControlMessage {
        let token = try? DeviceToken.read(paths.privateDeviceToken)
        // The token goes first, whatever the server says: the private copy,
        // then the mirror (the other order would bring the mirror back,
        // `restoreMirror`), so the tunnel stops before the server revokes.
        unlink(paths.privateDeviceToken.path)
        unlink(paths.deviceToken.path)
        var told = "the server was not told (not paired)"
        if let token {
            let call = CloudCallRequest(
                action: .unpair, api: token.api, anonKey: token.anonKey, deviceUUID: token.deviceUUID, token: token.token)
            switch await run(call) {
            case .done: told = "the server was told"
            case let .failed(why): told = "the server was not told: \(why)"
            default: told = "the server was not told"
            }
        }
        logger.notice("unpaired", metadata: ["SERVER": "\(told)"])
        return .reply(ok: true, token == nil ? "not paired" : "unpaired; \(told)")
    }

    /// The private copy as the supervisor wrote it (never the mirror).
    func record() -> DeviceToken? { try? DeviceToken.read(paths.privateDeviceToken) }

    /// Each mirror follows its private copy: a mirror someone removed or
    /// replaced is written again from it.
    func restoreMirror() {
        let tunnelUID = PrivilegeDrop.lookupUser(identity.user)
        for (source, mirror) in [(paths.privateDeviceToken, paths.deviceToken), (paths.privateTeamDatabase, paths.teamDatabase)] {
            guard let data = SecretFiles.readRootOwned(source) else { continue }
            // Compared through a descriptor that is no link a group member planted.
            if SecretFiles.readRootOwned(mirror, orOwnedBy: tunnelUID) == data { continue }
            do {
                try SecretFiles.writeMirror(data, to: mirror, reader: identity.user)
                logger.notice("\(mirror.lastPathComponent) written again from the private copy")
            } catch {
                logger.error("cannot write \(mirror.lastPathComponent)", metadata: ["ERROR": "\(error)"])
            }
        }
    }

    /// `busymate cloud postgres URL` (nil: `--off`): the team database's
    /// private copy and its mirror for the tunnel's second sink.
    func setTeamDatabase(_ url: String?) -> ControlMessage {
        guard let url else {
            let had = FileManager.default.fileExists(atPath: paths.privateTeamDatabase.path)
            unlink(paths.privateTeamDatabase.path)
            unlink(paths.teamDatabase.path)
            logger.notice("team database off")
            return .reply(ok: true, had ? "team database off" : "no team database was set")
        }
        let address: TeamDatabase.Address
        do {
            address = try TeamDatabase.Address(url)
        } catch {
            return .reply(ok: false, error.description)
        }
        do {
            let record = TeamDatabase(url: url, deviceUUID: try ensureDeviceUUID(), setAt: Date())
            let data = try record.encoded()
            try writePrivate(data, to: paths.privateTeamDatabase)
            try SecretFiles.writeMirror(data, to: paths.teamDatabase, reader: identity.user)
        } catch {
            return .reply(ok: false, "cannot keep the team database: \(error)")
        }
        logger.notice("team database set", metadata: ["DATABASE": "\(address.redacted)"])
        return .reply(
            ok: true, "the tunnel now sends every exchange captured from now on to \(address.redacted) as well (busymate cloud status)")
    }

    // MARK: the child

    /// Runs the call in a child that gives up root first, and reads its line.
    func run(_ request: CloudCallRequest) async -> CloudCallResult? {
        let input: Data
        do {
            input = try JSONEncoder().encode(request)
        } catch {
            return .failed("cannot encode the request")
        }
        let executable = callExecutable
        let arguments = ["--cloud-call"] + identity.arguments
        let deadline = Self.callDeadline
        return await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: Self.runChild(executable, arguments, input: input, deadline: deadline))
            }
            thread.name = "busymate-cloud-call"
            thread.start()
        }
    }

    private static func runChild(_ executable: String, _ arguments: [String], input: Data, deadline: TimeInterval) -> CloudCallResult? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for key in Systemd.unitOnlyEnvironment { environment[key] = nil }
        process.environment = environment
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        do {
            try process.run()
        } catch {
            return .failed("cannot start \(executable): \(error)")
        }
        // A child that died before reading: EPIPE, not a trap.
        try? stdin.fileHandleForWriting.write(contentsOf: input)
        try? stdin.fileHandleForWriting.close()
        let timer = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + deadline, execute: timer)
        let output = stdout.fileHandleForReading.readData(ofLength: 32 << 10)
        process.waitUntilExit()
        timer.cancel()
        guard process.terminationReason == .exit else { return .failed("no answer within \(Int(deadline)) s") }
        return CloudCallResult.parse(String(decoding: output, as: UTF8.self))
    }

    // MARK: private files

    func ensureDeviceUUID() throws -> String {
        if let text = try? String(contentsOf: paths.privateDeviceUUID, encoding: .utf8) {
            let uuid = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if UUID(uuidString: uuid) != nil { return uuid.lowercased() }
        }
        let uuid = UUID().uuidString.lowercased()
        try writePrivate(Data((uuid + "\n").utf8), to: paths.privateDeviceUUID)
        return uuid
    }

    func readCloudConfig() -> CloudConfig? {
        guard let data = FileManager.default.contents(atPath: paths.privateCloudConfig.path) else { return nil }
        return try? JSONDecoder().decode(CloudConfig.self, from: data)
    }

    private func writePrivate(_ data: Data, to url: URL) throws {
        try FileManager.default.createDirectory(at: paths.privateDirectory, withIntermediateDirectories: true)
        try AtomicFile.write(data, to: url, mode: 0o600)
    }

    // MARK: what the claim says of this machine

    static func hostname() -> String { CloudCallResult.printable(ProcessInfo.processInfo.hostName) }

    /// The seed's `model`, from DMI (`Vendor Product`), when there is one.
    static func model() -> String? {
        func read(_ name: String) -> String? {
            (try? String(contentsOfFile: "/sys/class/dmi/id/\(name)", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines).nonEmpty
        }
        let parts = [read("sys_vendor"), read("product_name")].compactMap { $0 }
        return parts.isEmpty ? nil : CloudCallResult.printable(parts.joined(separator: " "))
    }

    /// The seed's `os_version`, from `/etc/os-release`'s PRETTY_NAME.
    static func osVersion() -> String? {
        guard let text = try? String(contentsOfFile: "/etc/os-release", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_NAME=") {
            return CloudCallResult.printable(
                String(line.dropFirst("PRETTY_NAME=".count)).trimmingCharacters(in: CharacterSet(charactersIn: "\"'")))
        }
        return nil
    }
}

extension JSONEncoder {
    static var cloud: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

fileprivate extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
