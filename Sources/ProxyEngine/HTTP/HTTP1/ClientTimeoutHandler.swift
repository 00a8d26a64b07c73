import BusymateShared
import Logging
import NIOCore
import NIOHTTP1

/// Carries out `ClientTimeoutState` on one connection: sits right after
/// the request decoder, so it sees requests as they are decoded and
/// responses as they leave. `RequestLineTap`, before the decoder, tells it
/// when bytes arrive.
final class ClientTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// What a body timeout is to the handlers after this one (the forward
    /// handler records it on the exchange's row).
    struct Expired: Error, CustomStringConvertible {
        var description: String
        /// A 408 went to the client (no response had begun).
        var answered: Bool
    }

    private var state = ClientTimeoutState()
    /// The running timer's deadline: a state change only moves it.
    private lazy var deadline = MovingDeadline { [weak self] in
        guard let self, let timer = running else { return }
        running = nil
        expire(timer)
    }
    private var running: ClientTimeoutState.Timer?
    private var context: ChannelHandlerContext?
    private let timeouts: AppSettings.Timeouts
    private let hooks: ExchangeHooks
    private let logger: Logger
    /// The CONNECT target of an intercepted tunnel, for the row.
    private let target: ProxyTarget?

    init(timeouts: AppSettings.Timeouts, hooks: ExchangeHooks, logger: Logger, interceptedTarget: ProxyTarget? = nil) {
        self.timeouts = timeouts
        self.hooks = hooks
        self.logger = logger
        target = interceptedTarget
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { carryOut(state.connectionStarted()) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline.cancel()
        running = nil
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        carryOut(state.connectionStarted())
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        running = nil
        context.fireChannelInactive()
    }

    /// From `RequestLineTap`: bytes came in.
    func bytesArrived() { carryOut(state.bytesArrived()) }

    /// A request's head has been decoded and its end not yet: for
    /// `RequestLineTap`, the next bytes are no request line.
    private(set) var requestUnderway = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(head):
            requestUnderway = true
            carryOut(head.method == .CONNECT ? state.leftHTTP() : state.requestHead())
        case .body: carryOut(state.requestBody())
        case .end:
            requestUnderway = false
            carryOut(state.requestEnd())
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case let .head(head) where head.status == .switchingProtocols: carryOut(state.leftHTTP())
        case let .head(head) where head.status.code >= 200: carryOut(state.responseHead())
        case .end:
            context.write(data, promise: promise)
            carryOut(state.responseEnd())
            return
        default: break
        }
        context.write(data, promise: promise)
    }

    private func carryOut(_ action: ClientTimeoutState.Action) {
        switch action {
        case .none: return
        case .stop:
            running = nil
            deadline.clear()
        case let .start(timer):
            guard let context else { return }
            running = timer
            deadline.set(after: .milliseconds(Int64(seconds(timer) * 1000)), on: context.eventLoop)
        }
    }

    private func seconds(_ timer: ClientTimeoutState.Timer) -> Double {
        switch timer {
        case .head: return timeouts.requestHead
        case .body: return timeouts.bodyProgress
        case .idle: return timeouts.idle
        }
    }

    private func expire(_ timer: ClientTimeoutState.Timer) {
        guard let context else { return }
        let (what, key) = Self.words(timer)
        let why = "\(what) within \(Self.format(seconds(timer))) s (timeouts.\(key))"
        switch state.fired(timer) {
        case .ignore:
            return
        case .closeQuietly:
            logger.debug("closed an idle connection", metadata: ["WHY": "\(why)"])
            context.close(promise: nil)
        case let .answer408(timer):
            logger.notice("request timed out", metadata: ["WHY": "\(why)"])
            // The exchange's row first (the forward handler's, or ours for a
            // head that never came whole), then the answer and the close.
            if timer == .head { recordHeadTimeout(why, context: context) }
            if timer == .body { context.fireErrorCaught(Expired(description: "\(why); answered 408", answered: true)) }
            let body = context.channel.allocator.buffer(string: "Busymate: \(why)\n")
            let headers = HTTPHeaders([("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(body.readableBytes)")])
            context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))), promise: nil)
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        case .close:
            logger.notice("request timed out while its response was under way", metadata: ["WHY": "\(why)"])
            context.fireErrorCaught(Expired(description: why, answered: false))
            context.close(promise: nil)
        }
    }

    /// A head that never came whole is no exchange the forward handler
    /// knows: the hooks make its row.
    private func recordHeadTimeout(_ why: String, context: ChannelHandlerContext) {
        hooks.requestHeadTimedOut(intercepted: target, client: context.channel.remoteAddress, why: why)
    }

    static func words(_ timer: ClientTimeoutState.Timer) -> (String, String) {
        switch timer {
        case .head: return ("the request head did not arrive whole", "request_head_seconds")
        case .body: return ("the request body sent nothing", "body_seconds")
        case .idle: return ("the keep-alive connection sent no request", "idle_seconds")
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
