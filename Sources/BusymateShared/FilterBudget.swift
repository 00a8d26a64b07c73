/// How long a filter's regular expressions may run over one exchange, and
/// where their compiled forms come from: per value as the store's SQL
/// runs them, or one deadline for a whole match (a rule's, on an event
/// loop), with the patterns a rule compiled when settings were read.
package struct FilterBudget: Sendable {
    /// nil: `limit` for each value.
    var deadline: ContinuousClock.Instant?
    var limit: Duration
    /// Compiled by pattern text; a pattern missing here comes from the shared cache.
    var patterns: [String: FilterPattern] = [:]

    package static func perValue(_ limit: Duration) -> FilterBudget { FilterBudget(deadline: nil, limit: limit) }

    package static func whole(_ limit: Duration, patterns: [String: FilterPattern]) -> FilterBudget {
        FilterBudget(deadline: ContinuousClock.now.advanced(by: limit), limit: limit, patterns: patterns)
    }

    func match(_ pattern: String, _ text: String?) throws(FilterPatternTimeout) -> Bool {
        guard let text, let compiled = patterns[pattern] ?? FilterPattern.cached(pattern) else { return false }
        guard let deadline else { return try compiled.matches(text, within: limit) }
        return try compiled.matches(text, until: deadline, limit: limit)
    }
}
