import NIOCore
import NIOPosix

/// Opens upstream connections: the one place the data path dials, so a
/// test can stand in for the network (an `EmbeddedChannel` upstream).
protocol UpstreamConnector: Sendable {
    /// A connection for `dial` (to `upstream_proxy` when it has one; a
    /// CONNECT through it is the caller's), `initialize` run on it first.
    /// `halfClosure`: the server's FIN is passed on (a glued tunnel), not
    /// taken as its hang-up (HTTP, where it ends the connection).
    func connect(
        _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
        initialize: @escaping @Sendable (Channel) throws -> Void
    ) -> EventLoopFuture<Channel>
}
