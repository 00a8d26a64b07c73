/// What one batch came to, as the sink acts on it.
public enum PushOutcome: Sendable, Equatable {
    /// The server has every row of the batch (some may have been there already).
    case accepted
    /// Too large for the server or a gateway in front of it (413): halve.
    case tooLarge
    /// The token is refused (401, PostgREST's PGRST301/PGRST303): re-pair.
    case unauthorized(String)
    /// A row's data is refused (a data or integrity error): halve to find
    /// it, and leave that one row in the local store only.
    case rowRejected(String)
    /// Refused for a reason that waiting will not fix soon (403, other 4xx):
    /// nothing is dropped; tried again after a long pause.
    case refused(String)
    /// Down, slow, overloaded or garbled: back off and send the same batch again.
    case retry(String, after: Double?)
}
