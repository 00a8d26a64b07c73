import BusymateShared

/// What the rules decide for one request: the first enabled match of each
/// kind. A block wins over everything; a local answer over dialling.
struct RulePlan {
    var block: Rule?
    var mapLocal: Rule?
    var mapRemote: Rule?
    var hostOverride: String?
    var requestEdits: Rule.HeaderEdits?
    var responseEdits: Rule.HeaderEdits?
    /// The rules that applied, for the capture row (block and map_local
    /// add theirs where they act).
    var applied: [String] = []
    /// Rules whose filter ran out of the request's time budget (taken as no match), for the row's note.
    var timedOut: [String] = []
}
