import BusymateShared
import NIOCore
import NIOHTTP1

/// Breakpoints: a held message is read whole, recorded, and sent on (as
/// it was or as edited), answered with an error, or dropped, once
/// `BreakpointController` resolves it. Meanwhile the next request on the
/// connection waits in `HTTPServerPipelineHandler`, so order is kept.
extension HTTPForwardHandler {
    // MARK: requests

    func holdRequestBody(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        guard case var .holding(held) = exchange else { return }
        // Not shared while it grows: no copy per part.
        exchange = .idle
        var part = buffer
        held.body.writeBuffer(&part)
        guard held.body.readableBytes > BreakpointController.maxHeldBytes else {
            exchange = .holding(held)
            return
        }
        logger.notice("a request too large to hold at a breakpoint goes on unheld", metadata: ["BYTES": "\(held.body.readableBytes)"])
        forward(held.head, target: held.target, originForm: held.originForm, plan: held.plan, context: context)
        if case .active = exchange { forwardBody(held.body) }
    }

    func pauseRequest(_ held: HeldRequest, context: ChannelHandlerContext) {
        guard let record = exchangeCapture?.record else {
            // Nowhere to record it, so nobody could resolve it.
            requestResolved(.forward(held.message, edited: false))
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        breakpoints.pause(held.message, kind: .request, requestID: record.requestID, method: record.method, url: record.url, on: context.eventLoop)
            .whenSuccess { bound.value.requestResolved($0) }
    }

    private func requestResolved(_ resolution: BreakpointResolution) {
        guard let context, case let .holding(held) = exchange, held.ended else { return }
        switch resolution {
        case .dropped:
            return
        case let .abort(id):
            exchange = .idle
            exchangeCapture?.requestBodyPart(held.body)
            exchangeCapture?.answered(.badGateway)
            submitCapture(error: "aborted at breakpoint \(id)")
            ProxyReply.write(.badGateway, "Busymate: the request was aborted at breakpoint \(id)", close: !held.head.isKeepAlive, context: context,
                             wrap: Self.wrapOutboundOut)
        case let .forward(message, edited):
            var (head, target, originForm, body) = (held.head, held.target, held.originForm, held.body)
            if edited {
                guard let editedHead = message.requestHead, let (editedTarget, editedOriginForm) = destination(of: editedHead) else {
                    exchange = .idle
                    submitCapture(error: "the edited request has no destination")
                    ProxyReply.write(.badRequest, "Busymate: the edited request has no destination", close: true, context: context, wrap: Self.wrapOutboundOut)
                    return
                }
                (head, target, originForm) = (editedHead, editedTarget, editedOriginForm)
                // The client's own HTTP version decides how it is answered.
                head.version = held.head.version
                body = context.channel.allocator.buffer(bytes: message.body)
                exchangeCapture?.requestEdited(head, target: target, originForm: originForm)
            }
            exchange = .idle
            forward(head, target: target, originForm: originForm, plan: held.plan, context: context)
            guard case .active = exchange else { return }
            if body.readableBytes > 0 { forwardBody(body) }
            forwardEnd(nil)
        }
    }

    // MARK: responses

    func holdResponseBody(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        guard case var .active(active) = exchange, var held = active.heldResponse else { return }
        exchange = .idle
        active.heldResponse = nil
        var part = buffer
        held.body.writeBuffer(&part)
        guard held.body.readableBytes > BreakpointController.maxHeldBytes else {
            active.heldResponse = held
            exchange = .active(active)
            return
        }
        logger.notice("a response too large to hold at a breakpoint goes on unheld", metadata: ["BYTES": "\(held.body.readableBytes)"])
        exchange = .active(active)
        respondHead(held.head, isHeadRequest: held.isHeadRequest, context: context)
        respondBody(held.body, context: context)
    }

    func pauseResponse(_ held: HeldResponse, context: ChannelHandlerContext) {
        guard let record = exchangeCapture?.record else {
            responseResolved(.forward(held.message, edited: false))
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        breakpoints.pause(held.message, bodyless: held.bodyless, kind: .response, requestID: record.requestID, method: record.method, url: record.url,
                          on: context.eventLoop)
            .whenSuccess { bound.value.responseResolved($0) }
    }

    private func responseResolved(_ resolution: BreakpointResolution) {
        guard let context, case var .active(active) = exchange, let held = active.heldResponse, held.ended else { return }
        active.heldResponse = nil
        exchange = .active(active)
        switch resolution {
        case .dropped:
            return
        case let .abort(id):
            exchange = .idle
            exchangeCapture?.responseHead(held.head)
            exchangeCapture?.responseBodyPart(held.body)
            submitCapture(error: "the response was aborted at breakpoint \(id)")
            closeUpstream()
            context.close(promise: nil)
        case let .forward(message, edited):
            var (head, body) = (held.head, held.body)
            if edited, let editedHead = message.responseHead {
                (head, body) = (editedHead, context.channel.allocator.buffer(bytes: message.body))
            }
            respondHead(head, isHeadRequest: held.isHeadRequest, context: context)
            if body.readableBytes > 0 { respondBody(body, context: context) }
            respondEnd(nil, context: context)
        }
    }

    /// The client left: a held message goes nowhere.
    func releaseHold() {
        guard let requestID = exchangeCapture?.record.requestID else { return }
        switch exchange {
        case .holding: breakpoints.clientLeft(requestID: requestID)
        case let .active(active) where active.heldResponse != nil: breakpoints.clientLeft(requestID: requestID)
        default: break
        }
    }
}
