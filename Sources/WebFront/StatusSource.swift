import BusymateShared
import CaptureStore
import Foundation
import NIOPosix
import Synchronization

/// The readiness card's data: the supervisor's report (over `control.sock`,
/// as `busymate status` asks for it) and what the store adds.
public struct StatusSource: Sendable {
    private let fetch: @Sendable () async -> JSONNode?

    public init(_ fetch: @escaping @Sendable () async -> JSONNode?) { self.fetch = fetch }

    public func json() async -> JSONNode? { await fetch() }

    /// The live one.
    public static func supervisor(_ paths: GroupPaths, reader: CaptureReader) -> StatusSource {
        // Counting a million rows takes tens of milliseconds: once in five seconds.
        let counted = Mutex<(count: Int, at: Date)?>(nil)
        let perDevice = Mutex<(counts: [String: Int], at: Date)?>(nil)
        return StatusSource {
            var report = (try? await NIOThreadPool.singleton.runIfActive { try request(paths) }) ?? StatusReport.offline(paths)
            let settings = SettingsFile.read(paths.settings).settings
            let ttl = settings?.pinTTL ?? AppSettings().pinTTL
            let store = try? await reader.read { repos in
                let known = counted.withLock { c in c.flatMap { Date().timeIntervalSince($0.at) < 5 ? $0.count : nil } }
                let count = try known ?? repos.traffic.count()
                if known == nil { counted.withLock { $0 = (count, Date()) } }
                let knownDevices = perDevice.withLock { c in c.flatMap { Date().timeIntervalSince($0.at) < 5 ? $0.counts : nil } }
                let devices = try knownDevices ?? repos.traffic.exchangesByDevice(since: Calendar.current.startOfDay(for: Date()))
                if knownDevices == nil { perDevice.withLock { $0 = (devices, Date()) } }
                return (
                    last: try repos.traffic.lastID(), count: count,
                    pinned: try repos.pinned.all().filter { $0.lastSeen.addingTimeInterval(ttl) > Date() },
                    devices: devices
                )
            }
            // The devices view: named ones and every client seen, with presence (seed 004's card per device).
            report.devices = DeviceRow.merge(
                settings: settings ?? AppSettings(), seen: TunnelStatus.read(paths.status)?.devices ?? [],
                onboarding: OnboardingLog.read(paths.onboarding), exchangesToday: store?.devices ?? [:])
            guard let encoded = try? StatusCoding.encoder.encode(report),
                case let .object(members)? = try? JSONParser.parse(Array(encoded)).value
            else {
                return nil
            }
            let added: [ExchangeJSON.Member] = [
                ("ssl_proxying_empty", ExchangeJSON.bool(settings?.sslInclude.isEmpty == true)),
                (
                    "pinned",
                    ExchangeJSON.array(
                        (store?.pinned ?? []).map {
                            ExchangeJSON.object([
                                ("host", ExchangeJSON.string($0.host)), ("count", ExchangeJSON.number($0.count)),
                                ("last_seen", ExchangeJSON.date($0.lastSeen)), ("reason", ExchangeJSON.string($0.reason)),
                            ])
                        })
                ),
                ("in_flight", ExchangeJSON.number(OpenExchangesFile.read(paths)?.count ?? 0)),
                (
                    "store",
                    ExchangeJSON.object([("exchanges", ExchangeJSON.number(store?.count)), ("last_id", ExchangeJSON.number(store?.last))])
                ),
                ("problems", ExchangeJSON.array(report.problems.map { ExchangeJSON.string($0) })),
            ]
            return JSONNode(.object(members + added))
        }
    }

    struct Refused: Error {}

    public static func request(_ paths: GroupPaths) throws -> StatusReport {
        let socket = try UnixSocket.connect(path: paths.controlSocket.path)
        defer { socket.close() }
        socket.setReceiveTimeout(seconds: 5)
        try socket.send(ControlMessage(.status))
        guard let (reply, fds) = try socket.receive() else { throw Refused() }
        fds.forEach { close($0) }
        guard let report = reply.report else { throw Refused() }
        return report
    }
}
