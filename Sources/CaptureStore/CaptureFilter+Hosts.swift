import BusymateShared

extension CaptureFilter.Clause {
    /// Whether its SQL is an OR of two terms (a header, body or content-type
    /// clause on either message).
    var isDisjunction: Bool {
        switch self {
        case let .header(_, side), let .body(_, side), let .contentType(_, side): return side == .either
        default: return false
        }
    }
}

extension CaptureFilter {
    /// What this filter says of the host alone: a filter every row it
    /// matches also matches (its `~d` clauses, as they are combined), or nil
    /// when it does not confine the host. `ExchangePage` runs it over the
    /// `hosts` table to read only those hosts' rows.
    var hosts: CaptureFilter? {
        switch self {
        case .clause(.domain): return self
        case let .and(left, right):
            switch (left.hosts, right.hosts) {
            case let (l?, r?): return .and(l, r)
            case let (l?, nil): return l
            case let (nil, r?): return r
            case (nil, nil): return nil
            }
        case let .or(left, right):
            guard let l = left.hosts, let r = right.hosts else { return nil }
            return .or(l, r)
        case .clause, .not: return nil
        }
    }
}
