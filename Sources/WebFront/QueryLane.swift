import BusymateShared
import CaptureStore

/// Which threads a read of the store takes. A body search or a regular
/// expression may read the whole store (seconds over a large one): it must
/// not hold the threads that answer the status, one exchange or a plain
/// page.
public enum QueryLane: Sendable {
    case cheap, slow

    /// `.slow` for a filter that searches bodies or has a regular expression.
    static func of(_ filter: CaptureFilter?) -> QueryLane {
        guard let filter else { return .cheap }
        return isSlow(filter) ? .slow : .cheap
    }

    private static func isSlow(_ filter: CaptureFilter) -> Bool {
        switch filter {
        case let .not(inner): return isSlow(inner)
        case let .and(left, right), let .or(left, right): return isSlow(left) || isSlow(right)
        case let .clause(clause): return isSlow(clause)
        }
    }

    private static func isSlow(_ clause: CaptureFilter.Clause) -> Bool {
        switch clause {
        case .body: return true
        // Matched against the hosts table first, not row by row.
        case .domain: return false
        case let .url(pattern), let .method(pattern), let .header(pattern, _), let .contentType(pattern, _),
            let .source(pattern), let .destination(pattern), let .rule(pattern), let .device(pattern), let .marker(pattern),
            let .comment(pattern):
            return isRegex(pattern)
        case .all, .status, .error, .noResponse, .websocket, .marked, .replay, .tls, .dns, .proto, .grpc, .since, .until,
            .replayedResponse, .response, .asset, .http, .tcp, .udp:
            return false
        }
    }

    /// Plain text is a substring search; anything else goes to ICU.
    private static func isRegex(_ pattern: String) -> Bool {
        pattern.contains { ".^$*+?()[]{}|\\".contains($0) }
    }
}
