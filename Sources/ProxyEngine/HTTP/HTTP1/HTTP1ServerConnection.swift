import BusymateShared
import Logging
import NIOCore
import NIOHTTP1

/// The HTTP/1 server connection facing the client: carries out
/// `HTTP1ConnectionStateMachine` between the request decoder and the
/// exchange handler. It hands up one exchange at a time (pipelined requests
/// wait, and the socket is not read meanwhile), runs the client's clocks,
/// answers what the decoder refuses, lets each connection finish one more
/// exchange when the tunnel drains, and closes after a half-closed client's
/// last answer. `RequestLineTap`, before the decoder, tells it when bytes arrive.
final class HTTP1ServerConnection: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    var machine: HTTP1ConnectionStateMachine
    var context: ChannelHandlerContext?
    /// One wake-up at the machine's deadline: moving it later is no new timer.
    private lazy var wake = MovingDeadline { [weak self] in self?.clockRanOut() }
    let timeouts: AppSettings.Timeouts
    let hooks: ExchangeHooks
    let logger: Logger
    /// The CONNECT target of an intercepted tunnel, for the rows made here.
    let target: ProxyTarget?
    /// The bytes the decoder refused, for a refused request's row.
    weak var tap: RequestLineTap?
    /// Closes a client that has had its last answer (the layers' owner knows how).
    private weak var owner: ProxyPipeline?
    /// While what waited is handed up after an answer: that answer's end being written.
    private var answerBeingWritten: EventLoopFuture<Void>?

    init(
        timeouts: AppSettings.Timeouts, hooks: ExchangeHooks, logger: Logger, interceptedTarget: ProxyTarget? = nil,
        owner: ProxyPipeline? = nil
    ) {
        machine = HTTP1ConnectionStateMachine(
            clocks: .init(
                head: Self.amount(timeouts.requestHead), body: Self.amount(timeouts.bodyProgress),
                idle: Self.amount(timeouts.idle), drain: Self.amount(timeouts.drainIdleWait)))
        self.timeouts = timeouts
        self.hooks = hooks
        self.logger = logger
        target = interceptedTarget
        self.owner = owner
    }

    static func amount(_ seconds: Double) -> TimeAmount { .milliseconds(Int64(seconds * 1000)) }

    /// For `RequestLineTap`: a request's head has been decoded and its end
    /// not yet, so the next bytes are no request line.
    var readingRequest: Bool { machine.readingRequest }

    /// From `RequestLineTap`: bytes came in.
    func bytesArrived() {
        guard let context else { return }
        machine.bytesArrived(now: context.eventLoop.now)
        rearm(context)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { started(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        started(context)
        context.fireChannelActive()
    }

    private func started(_ context: ChannelHandlerContext) {
        machine.connectionStarted(now: context.eventLoop.now)
        rearm(context)
    }

    /// Leaving after a CONNECT or a `101`: what waited goes on to whatever follows.
    func handlerRemoved(context: ChannelHandlerContext) {
        wake.cancel()
        let (waiting, read) = machine.leave()
        for item in waiting {
            switch item {
            case let .part(part): context.fireChannelRead(Self.wrapInboundOut(part))
            case let .malformed(error): context.fireErrorCaught(error)
            case .inputClosed: context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        if read { context.read() }
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        wake.cancel()
        machine.connectionClosed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = Self.unwrapInboundIn(data)
        let action = machine.inbound(.part(part), now: context.eventLoop.now)
        rearm(context)
        carryOut(action, .part(part), data: data, context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Bytes read after the decoder refused some: the first refusal is
        // answered, in its turn; these say nothing more and end nothing.
        if machine.refusedBytes, let decoding = error as? ByteToMessageDecoderError,
            case .dataReceivedInErrorState = decoding
        {
            return
        }
        guard let parse = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let action = machine.inbound(.malformed(parse), now: context.eventLoop.now)
        rearm(context)
        carryOut(action, .malformed(parse), data: nil, context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            let action = machine.inbound(.inputClosed, now: context.eventLoop.now)
            rearm(context)
            carryOut(action, .inputClosed, data: nil, context: context)
            return
        }
        // Draining is this layer's job: the event goes no further.
        if event is ChannelShouldQuiesceEvent {
            machine.quiesce(now: context.eventLoop.now)
            rearm(context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        if machine.read() { context.read() }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case var .head(head):
            let action = machine.responseHead(head.status)
            rearm(context)
            switch action {
            case .write:
                context.write(data, promise: promise)
            case .writeSayingClose:
                head.headers.replaceOrAdd(name: "Connection", value: "close")
                context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
            }
        case .body:
            context.write(data, promise: promise)
        case .end:
            let action = machine.responseEnd(now: context.eventLoop.now)
            rearm(context)
            switch action {
            case .write:
                let written = context.write(data)
                written.cascade(to: promise)
                handUpWaiting(context, after: written)
            case .writeThenClose:
                let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
                context.write(data).whenComplete { result in
                    promise?.completeWith(result)
                    bound.value.closeFinished()
                }
            }
        }
    }

    /// The exchange under way was answered: what waited behind it goes up,
    /// then reads resume. The answer is flushed first, and a close this
    /// causes waits for the answer's end to be written.
    private func handUpWaiting(_ context: ChannelHandlerContext, after written: EventLoopFuture<Void>) {
        guard let first = machine.nextWaiting(now: context.eventLoop.now) else {
            if machine.takeReadPending() { context.read() }
            return
        }
        context.flush()
        let outer = answerBeingWritten
        answerBeingWritten = written
        var next: (HTTP1ConnectionStateMachine.Inbound, HTTP1ConnectionStateMachine.InboundAction)? = first
        while let (item, action) = next {
            rearm(context)
            carryOut(action, item, data: nil, context: context)
            next = machine.nextWaiting(now: context.eventLoop.now)
        }
        answerBeingWritten = outer
        rearm(context)
        // As after a read from the socket: the exchange flushes what it sent upstream.
        context.fireChannelReadComplete()
        if machine.takeReadPending() { context.read() }
    }

    private func carryOut(
        _ action: HTTP1ConnectionStateMachine.InboundAction, _ item: HTTP1ConnectionStateMachine.Inbound, data: NIOAny?,
        context: ChannelHandlerContext
    ) {
        switch action {
        case .deliver:
            handUp(item, data: data, context: context)
        case .deliverThenClose:
            handUp(item, data: data, context: context)
            closeFinished()
        case .wait, .drop:
            break
        case .passOn:
            if case let .malformed(error) = item { context.fireErrorCaught(error) }
        case let .refuse(error, answer, recordRow):
            refuse(error, answer: answer, recordRow: recordRow, context: context)
        case .inputClosed(closeNow: true):
            // Nothing in flight: this layer closes (the exchange handler has nothing to finish).
            closeFinished()
        case .inputClosed(closeNow: false):
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
    }

    private func handUp(_ item: HTTP1ConnectionStateMachine.Inbound, data: NIOAny?, context: ChannelHandlerContext) {
        guard case let .part(part) = item else { return }
        context.fireChannelRead(data ?? Self.wrapInboundOut(part))
    }

    /// Closes once the client has its last answer: at once, or, while an
    /// answer's end is being written, when that write is done.
    func closeFinished() {
        if let written = answerBeingWritten, let context {
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.whenComplete { _ in bound.value.closeNow() }
            return
        }
        closeNow()
    }

    private func closeNow() {
        if let owner { owner.closeFinishedClient() } else { context?.close(promise: nil) }
    }

    func rearm(_ context: ChannelHandlerContext) {
        if let (_, at) = machine.deadline { wake.set(at: at, on: context.eventLoop) } else { wake.clear() }
    }
}
