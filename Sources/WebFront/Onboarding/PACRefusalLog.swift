import Logging

/// The warning for a refused PAC, at most once per interval with a count of
/// the ones between: phones fetch their PAC often.
final class PACRefusalLog: Sendable {
    private let limit = LogLimit(interval: PACRefusalLog.interval)
    private let logger = Logger(label: "busymate.web.onboarding")
    static let interval = 10.0

    func refused(client: String?, reason: String, now: Double) {
        guard let earlier = limit.allow(now: now) else { return }
        logger.warning("a PAC was refused", metadata: ["CLIENT": "\(client ?? "?")", "REASON": "\(reason)", "UNSAID": "\(earlier)"])
    }
}
