/// The capture sink has no store for held messages.
struct NoBreakpointStore: Error, CustomStringConvertible {
    var description: String { "the capture sink keeps no held messages" }
}
