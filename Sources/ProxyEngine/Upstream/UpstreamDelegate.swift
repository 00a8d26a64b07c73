/// The exchange an upstream side works for: it takes the side's events, and
/// answers the two questions the side's reads and reuse depend on.
protocol UpstreamDelegate: AnyObject {
    func upstream(_ event: UpstreamEvent)
    /// Server reads wait while the client cannot take more.
    var clientIsWritable: Bool { get }
    /// No exchange is under way: a finished connection may be left for the next one.
    var exchangeIsIdle: Bool { get }
}
