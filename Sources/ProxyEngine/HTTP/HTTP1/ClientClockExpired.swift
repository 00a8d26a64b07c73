/// A client clock ran out mid-exchange: what the exchange handler records on the row.
struct ClientClockExpired: Error, CustomStringConvertible {
    var description: String
    /// A 408 went to the client (no response had begun).
    var answered: Bool
}
