/// What becomes of a body part the handler reports.
enum BodyPartFate {
    /// Read and going on at once.
    case forwarded
    /// Read into a held message: counted now, recorded once it goes on.
    case held
    /// A held part going on (or aborted): recorded, already counted.
    case released
    /// A response part recorded but never sent (an aborted hold).
    case unsent
}
