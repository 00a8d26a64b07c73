import Foundation

/// A filter's regular expression ran too long on one value and was stopped.
/// Thrown from the SQL functions, it ends the query with this text as
/// SQLite's message; `StoreHealth.describe` shows it as it is.
public struct FilterPatternTimeout: Error, CustomStringConvertible, Sendable {
    static let prefix = "the filter's regular expression "

    public var pattern: String
    public var limit: Duration = FilterPattern.timeLimit

    public var description: String {
        let limit = limit.components
        let seconds = Double(limit.seconds) + Double(limit.attoseconds) / 1e18
        return "\(Self.prefix)\"\(pattern)\" ran over \(seconds) s on one value and was stopped: "
            + "it backtracks too much (nested repetition such as (a+)+); simplify it, or search for plain text"
    }

    /// Whether SQLite's message for a failed query is this error's.
    package static func isOurs(_ message: String?) -> Bool { message?.hasPrefix(prefix) ?? false }
}
