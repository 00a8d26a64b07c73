import NIOHTTP2

/// An origin that would not process a stream of ours (GOAWAY below its id,
/// or REFUSED_STREAM), when it could not be sent again.
struct OriginRefusedStream: Error, CustomStringConvertible {
    /// Its body had gone already, past what is kept for a retry.
    let bodyAlreadySent: Bool

    var description: String {
        let why = "the origin refused the stream before processing it (GOAWAY or REFUSED_STREAM)"
        return bodyAlreadySent
            ? "\(why); it was not sent again because its body had already streamed past what is kept for a retry"
            : "\(why), and refused it again on a new connection"
    }
}
