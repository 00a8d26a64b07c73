import CLinux

/// What `--version` prints, exports name as their creator and `status`
/// shows. The commit is compiled in (Package.swift reads BUSYMATE_COMMIT or
/// the checkout's HEAD; "unknown" outside a checkout).
public enum BusymateVersion {
    public static let current = "0.1.0"

    public static var commit: String { String(cString: busymate_build_commit()) }

    /// `0.1.0 (commit 63ebc7d)`.
    public static var full: String { "\(current) (commit \(commit))" }

    /// A daemon's `--version` line: `busymate-tunnel 0.1.0 (commit 63ebc7d)`.
    public static func line(_ program: String) -> String { "\(program) \(full)\n" }
}
