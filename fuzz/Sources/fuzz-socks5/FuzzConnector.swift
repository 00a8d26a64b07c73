import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// Dials nothing: records what it was asked to dial and ends the dial as
/// `outcome` says, with an EmbeddedChannel as the server when it opens.
final class FuzzConnector: UpstreamConnector, @unchecked Sendable {
    // @unchecked: used on the one EmbeddedEventLoop of one run.
    let loop: EmbeddedEventLoop
    let outcome: DialOutcome
    var dials: [ProxyTarget] = []
    var peers: [EmbeddedChannel] = []
    private var pending: [EventLoopPromise<Channel>] = []

    init(loop: EmbeddedEventLoop, outcome: DialOutcome) {
        self.loop = loop
        self.outcome = outcome
    }

    func connect(
        _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
        initialize: @escaping @Sendable (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        dials.append(dial.target)
        let promise = loop.makePromise(of: Channel.self)
        pending.append(promise)
        if outcome.atOnce { answer() }
        return promise.futureResult
    }

    /// Ends the dials still under way.
    func answer() {
        let waiting = pending
        pending = []
        for promise in waiting {
            switch outcome.end {
            case let .opened(bound):
                let peer = EmbeddedChannel(loop: loop)
                peer.localAddress = bound
                peer.connect(to: DialOutcome.address("93.184.216.34", 443), promise: nil)
                peers.append(peer)
                promise.succeed(peer)
            case let .failed(error, _):
                promise.fail(error)
            }
        }
    }
}
