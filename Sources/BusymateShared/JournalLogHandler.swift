import CSystemd
import Foundation
import Logging

/// Sends each record to journald as structured fields, so that
/// `journalctl -u busymate SUBSYSTEM=mitm` and `REQUEST_ID=…` work.
/// (`sd_journal_send` is variadic, so this builds the iovecs for `sendv`.)
public struct JournalLogHandler: LevelFollowingLogHandler {
    public let subsystem: String
    public var metadata: Logger.Metadata = [:]
    public var overrideLevel: Logger.Level?

    public init(subsystem: String) { self.subsystem = subsystem }

    public func log(event: LogEvent) {
        var fields = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(Self.priority(event.level))",
            "SYSLOG_IDENTIFIER=\(LogControl.identifier)",
            "SUBSYSTEM=\(subsystem)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            let name = Self.fieldName(key)
            if !name.isEmpty { fields.append("\(name)=\(value)") }
        }
        Self.send(fields)
    }

    static func send(_ fields: [String]) {
        let encoded = fields.map { Array($0.utf8) }
        let total = encoded.reduce(0) { $0 + $1.count }
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var iovecs = [iovec]()
        iovecs.reserveCapacity(encoded.count)
        var offset = 0
        for field in encoded {
            field.withUnsafeBytes {
                storage.advanced(by: offset).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(storage), byteCount: $0.count)
            }
            iovecs.append(iovec(iov_base: storage.advanced(by: offset), iov_len: field.count))
            offset += field.count
        }
        _ = iovecs.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) }
    }

    /// journald field names: upper-case letters, digits and underscores, not
    /// starting with an underscore or digit.
    static func fieldName(_ key: String) -> String {
        var out = ""
        for scalar in key.uppercased().unicodeScalars {
            if ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) { out.unicodeScalars.append(scalar) } else { out.append("_") }
        }
        while out.first == "_" || out.first?.isNumber == true { out.removeFirst() }
        return String(out.prefix(64))
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }
}

/// Readable lines on stderr when journald is not there.
public struct StderrLogHandler: LevelFollowingLogHandler {
    public let subsystem: String
    public var metadata: Logger.Metadata = [:]
    public var overrideLevel: Logger.Level?

    public init(subsystem: String) { self.subsystem = subsystem }

    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        var line = "\(Self.timestamp()) \(LogControl.identifier)[\(getpid())] \(event.level) \(subsystem): \(event.message)"
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += "\n"
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count, let base = raw.baseAddress {
                let n = write(2, base.advanced(by: offset), raw.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }

    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, Int(ts.tv_nsec / 1_000_000))
    }
}
