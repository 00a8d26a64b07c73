import CSystemd
import Foundation

/// The supervisor's line to systemd. Every call is a no-op outside a unit
/// (no `NOTIFY_SOCKET`).
public enum Systemd {
    /// The environment a unit hands its main process and nobody else.
    public static let unitOnlyEnvironment = [
        "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
    ]

    public static var isSupervised: Bool { ProcessInfo.processInfo.environment["NOTIFY_SOCKET"] != nil }

    @discardableResult
    public static func notify(_ assignments: String) -> Bool {
        sd_notify(0, assignments) > 0
    }

    public static func ready(status: String) { notify("READY=1\nSTATUS=\(oneLine(status))") }
    public static func status(_ text: String) { notify("STATUS=\(oneLine(text))") }
    public static func watchdog() { notify("WATCHDOG=1") }
    public static func stopping() { notify("STOPPING=1") }

    /// `RELOADING=1` needs `MONOTONIC_USEC` from systemd 253's Type=notify-reload on.
    public static func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let usec = UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        notify("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    /// The watchdog interval systemd expects pings within, if any.
    public static var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(usec))
    }

    static func oneLine(_ s: String) -> String { s.replacingOccurrences(of: "\n", with: " ") }
}
