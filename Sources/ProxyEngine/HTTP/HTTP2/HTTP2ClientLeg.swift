import NIOCore

/// What a client connection that speaks HTTP/2 shares among its streams:
/// the connection's owner (TLS, closing), the origin connections its
/// streams open streams on, and how the client came to HTTP/2.
final class HTTP2ClientLeg {
    /// The client connection's layers' owner; each stream has its own.
    private(set) weak var owner: ProxyPipeline?
    let upstream: UpstreamHTTP2Pool
    /// Each stream's upstream response deadline, behind one timer.
    let responseDeadlines: DeadlineGroup
    /// h2c with prior knowledge (no TLS): plain origins are spoken to the same way when the client expected that of them.
    let priorKnowledge: Bool

    init(owner: ProxyPipeline, priorKnowledge: Bool) {
        self.owner = owner
        self.priorKnowledge = priorKnowledge
        upstream = UpstreamHTTP2Pool()
        responseDeadlines = DeadlineGroup(eventLoop: owner.channel.eventLoop)
    }
}
