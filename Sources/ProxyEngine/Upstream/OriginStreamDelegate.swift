import NIOHTTP1

/// What an exchange's stream on an origin HTTP/2 connection tells the
/// exchange's upstream side. Called on the connection's event loop.
protocol OriginStreamDelegate: AnyObject {
    /// Whether the client takes more now: while it does not, the stream's parts wait and its window stays shut.
    var clientIsWritable: Bool { get }
    func originStream(_ stream: OriginStream, received part: HTTPClientResponsePart)
    /// The parts of one read have been handed over: time to flush them to the client.
    func originStreamReadComplete(_ stream: OriginStream)
    /// The stream takes request body again.
    func originStreamWritable(_ stream: OriginStream)
    /// The stream is over: `error` nil when both ends finished cleanly.
    func originStream(_ stream: OriginStream, closed error: Error?)
}
