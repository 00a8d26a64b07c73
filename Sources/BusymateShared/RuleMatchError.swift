/// Why a rule's (or a breakpoint's) `match` was refused; `position` (from 1) is in the filter.
public struct RuleMatchError: Error, Sendable {
    public var message: String
    public var position: Int?
}
