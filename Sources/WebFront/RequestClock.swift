import NIOCore

/// Times a connection between requests, below HTTP: one waiting for a
/// request is closed after `silence` of nothing, and a request head must
/// be whole within `headTimeout` of its first byte (a slowloris client that
/// trickles a byte now and then gets `408`). A request being answered is
/// not timed here: a long export or the live WebSocket is not cut.
/// `RequestPhase` (after the HTTP decoder) says when requests begin and end.
final class RequestClock: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What `RequestPhase` sends down the pipeline.
    enum Event: Sendable {
        case answering, answered
    }

    private enum Phase {
        case idle, head, answering
    }

    private let headTimeout: TimeAmount
    private let silence: TimeAmount
    private let table: ConnectionTable
    private let id: Int
    private var phase = Phase.idle
    private var timer: Scheduled<Void>?
    /// Bytes of the next request came while this one was answered.
    private var readWhileAnswering = false

    init(headTimeout: TimeAmount, silence: TimeAmount, table: ConnectionTable, id: Int) {
        self.headTimeout = headTimeout
        self.silence = silence
        self.table = table
        self.id = id
    }

    func handlerAdded(context: ChannelHandlerContext) {
        idle(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        table.leave(id)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch phase {
        case .idle: head(context)
        case .head: break
        case .answering: readWhileAnswering = true
        }
        context.fireChannelRead(data)
    }

    /// Anything written answers a request: `RequestPhase` says so first,
    /// except for a WebSocket upgrade (its `101` is written below
    /// Hummingbird's handlers), whose socket is then never timed here
    /// (pings find a dead one).
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if phase != .answering { answering() }
        context.write(data, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? Event else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .answering:
            answering()
        case .answered:
            idle(context)
            if readWhileAnswering { head(context) }
            readWhileAnswering = false
        }
        promise?.succeed(())
    }

    private func answering() {
        phase = .answering
        timer?.cancel()
        timer = nil
        table.waiting(id, since: nil)
    }

    private func idle(_ context: ChannelHandlerContext) {
        phase = .idle
        table.waiting(id, since: .now())
        schedule(context, after: silence) { context in context.close(promise: nil) }
    }

    private func head(_ context: ChannelHandlerContext) {
        phase = .head
        schedule(context, after: headTimeout) { context in
            let answer = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            context.writeAndFlush(NIOAny(ByteBuffer(string: answer))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    private func schedule(_ context: ChannelHandlerContext, after delay: TimeAmount, _ expired: @escaping (ChannelHandlerContext) -> Void) {
        timer?.cancel()
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { expired(context) }
    }
}
