import Foundation
import Logging
import Synchronization

/// Process-wide logging set-up. The level follows `log_level` live: every
/// handler reads it here instead of keeping its own copy.
public enum LogControl {
    private static let levelIndex = Atomic<Int>(Logger.Level.allCases.firstIndex(of: .info) ?? 2)
    private static let identifierBox = Mutex("busymate")
    /// Read on every log call: `allCases` would build an array each time.
    private static let levels = Logger.Level.allCases

    public static var level: Logger.Level {
        get { levels[levelIndex.load(ordering: .relaxed)] }
        set { levelIndex.store(levels.firstIndex(of: newValue) ?? 2, ordering: .relaxed) }
    }

    public static var identifier: String { identifierBox.withLock { $0 } }

    public enum Sink: Sendable { case journal, stderr }

    /// journald when stderr is the unit's journal stream (systemd's own
    /// test: `JOURNAL_STREAM` names stderr's device and inode), or when
    /// forced with `BUSYMATE_LOG=journal`; stderr otherwise.
    public static func detectSink(environment: [String: String] = ProcessInfo.processInfo.environment) -> Sink {
        switch environment["BUSYMATE_LOG"] {
        case "journal": return FileManager.default.fileExists(atPath: "/run/systemd/journal/socket") ? .journal : .stderr
        case "stderr": return .stderr
        default: break
        }
        guard let stream = environment["JOURNAL_STREAM"] else { return .stderr }
        let parts = stream.split(separator: ":")
        var st = stat()
        guard parts.count == 2, fstat(2, &st) == 0 else { return .stderr }
        return "\(st.st_dev)" == parts[0] && "\(st.st_ino)" == parts[1] ? .journal : .stderr
    }

    /// `busymate.cloud.realtime` logs as `cloud`: SUBSYSTEM is one of
    /// DESIGN's, the rest of the label says where within it.
    public static func subsystem(_ label: String) -> String {
        guard label.hasPrefix("busymate.") else { return label }
        return String(label.dropFirst("busymate.".count).split(separator: ".", maxSplits: 1).first ?? "")
    }

    /// Call once, first thing in `main`. Logger labels are
    /// `busymate.<subsystem>`.
    public static func bootstrap(identifier: String, level: Logger.Level = .info) {
        identifierBox.withLock { $0 = identifier }
        self.level = level
        let sink = detectSink()
        LoggingSystem.bootstrap { label in
            let subsystem = Self.subsystem(label)
            switch sink {
            case .journal: return JournalLogHandler(subsystem: subsystem)
            case .stderr: return StderrLogHandler(subsystem: subsystem)
            }
        }
    }
}
