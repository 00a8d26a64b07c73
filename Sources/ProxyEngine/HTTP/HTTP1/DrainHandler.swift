import Logging
import NIOCore
import NIOHTTP1

/// When the tunnel drains, NIO's pipeline handler closes every idle
/// connection at once, and a busy one right after its response: a client
/// that just accepted, or is sending its next request on a kept-alive
/// connection, sees an empty reply or a reset. This lets each connection
/// finish one more exchange, told it is the last: quiesce is passed on only
/// once a request is under way whose response head has not gone out yet,
/// and that head says `Connection: close`. An idle connection that sends
/// nothing for most of the drain grace is closed.
///
/// A client that shuts its write side (half-close) has sent its last
/// request: the ones under way are answered, the last with
/// `Connection: close`, and then the connection closes.
final class DrainHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// Not draining.
        case serving
        /// Draining; quiesce is held back until a response can say `close`.
        case holding
        /// Quiesce was passed on: responses from here say `Connection: close`.
        case quiesced
    }

    private var state = State.serving
    /// Requests whose response has not ended (pipelining allows several).
    private var open = 0
    /// The oldest open request's response head has gone out.
    private var headSent = false
    private var idleTimer: Scheduled<Void>?
    /// The client shut its write side: no request will follow.
    private var inputClosed = false
    private let idleWait: TimeAmount
    private static let logger = Logger(label: "busymate.proxy")

    /// Closes a client that has finished (the layers' owner knows how).
    private weak var owner: ProxyPipeline?

    init(idleWait: Double = 1, owner: ProxyPipeline? = nil) {
        self.idleWait = .milliseconds(Int64(idleWait * 1000))
        self.owner = owner
    }

    private func closeFinished(_ channel: Channel) {
        if let owner { owner.closeFinishedClient() } else { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = Self.unwrapInboundIn(data) {
            open += 1
            if open == 1 { headSent = false }
        }
        context.fireChannelRead(data)
        passQuiesceIfReady(context: context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case var .head(head) where head.status.code >= 200 || head.status == .switchingProtocols:
            headSent = true
            if (state == .quiesced || inputClosed) && head.status != .switchingProtocols {
                head.headers.replaceOrAdd(name: "Connection", value: "close")
                context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
                return
            }
        case .end:
            open = max(0, open - 1)
            headSent = false
            if inputClosed && open == 0 {
                let bound = NIOLoopBound((self, context.channel), eventLoop: context.eventLoop)
                context.write(data).whenComplete { result in
                    promise?.completeWith(result)
                    bound.value.0.closeFinished(bound.value.1)
                }
                return
            }
            context.write(data, promise: promise)
            // Idle again while draining: wait for one more request, a while.
            if state == .holding && open == 0 { startIdleTimer(context: context) }
            return
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            idleTimer?.cancel()
            idleTimer = nil
            context.fireUserInboundEventTriggered(event)
            if open == 0 { closeFinished(context.channel) }
            return
        }
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard state == .serving else { return }
        state = .holding
        if open == 0 { startIdleTimer(context: context) }
        passQuiesceIfReady(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
    }

    /// A request is under way and its response head has not gone out: that
    /// head can carry `Connection: close`, so NIO may close after it.
    private func passQuiesceIfReady(context: ChannelHandlerContext) {
        guard state == .holding, open > 0, !headSent else { return }
        state = .quiesced
        idleTimer?.cancel()
        idleTimer = nil
        context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    }

    private func startIdleTimer(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        let channel = context.channel
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: idleWait) {
            let handler = bound.value
            guard handler.state == .holding, handler.open == 0 else { return }
            Self.logger.debug("closing a kept-alive connection that sent no request while the tunnel drained",
                              metadata: ["PEER": "\(channel.remoteAddress.map { "\($0)" } ?? "?")"])
            channel.close(promise: nil)
        }
    }
}
