import NIOCore
import NIOHTTP1

extension HTTP1ServerConnection {
    /// The wake-up came: the machine says whether a clock ran out, and which.
    func clockRanOut() {
        guard let context else { return }
        let expiry = machine.timerFired(now: context.eventLoop.now)
        switch expiry {
        case .ignore:
            return
        case .notYet:
            rearm(context)
        case let .closeQuietly(timer):
            logger.debug("closed an idle connection", metadata: ["WHY": "\(why(timer))"])
            context.close(promise: nil)
        case let .answer408(timer):
            let why = why(timer)
            logger.notice("request timed out", metadata: ["WHY": "\(why)"])
            // The exchange's row first (the exchange handler's, or ours for a
            // head that never came whole), then the answer and the close.
            if timer == .head {
                hooks.requestHeadTimedOut(intercepted: target, client: context.channel.remoteAddress, why: why)
            } else {
                context.fireErrorCaught(ClientClockExpired(description: "\(why); answered 408", answered: true))
            }
            let body = context.channel.allocator.buffer(string: "Busymate: \(why)\n")
            let headers = HTTPHeaders([
                ("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(body.readableBytes)"),
            ])
            context.write(
                Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))), promise: nil)
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        case let .close(timer):
            let why = why(timer)
            logger.notice("request timed out while its response was under way", metadata: ["WHY": "\(why)"])
            context.fireErrorCaught(ClientClockExpired(description: why, answered: false))
            context.close(promise: nil)
        }
    }

    private func why(_ timer: HTTP1ConnectionStateMachine.Timer) -> String {
        let (what, key) = TimeoutWords.words(timer)
        return "\(what) within \(TimeoutWords.format(seconds(timer))) s (\(key))"
    }

    private func seconds(_ timer: HTTP1ConnectionStateMachine.Timer) -> Double {
        switch timer {
        case .head: return timeouts.requestHead
        case .body: return timeouts.bodyProgress
        case .idle: return timeouts.idle
        case .drain: return timeouts.drainIdleWait
        }
    }

    /// The decoder refused the client's bytes: `431` for a header block over
    /// the limit, `400` for anything else, unless a response has begun; the
    /// row is ours when no exchange had begun. The decoder closes the
    /// connection right after.
    func refuse(_ error: HTTPParserError, answer: Bool, recordRow: Bool, context: ChannelHandlerContext) {
        let status: HTTPResponseStatus = error == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
        let why = MalformedRequest.explain(error)
        logger.notice("refused a malformed request", metadata: ["STATUS": "\(status.code)", "ERROR": "\(error)"])
        let response = answer ? MalformedRequest.answer(status, why, allocator: context.channel.allocator) : nil
        if let response {
            context.write(Self.wrapOutboundOut(.head(response.head)), promise: nil)
            if let body = response.body { context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
        }
        if recordRow {
            hooks.requestRefused(
                line: tap?.refusedRequestLine(), intercepted: target, client: context.channel.remoteAddress, status: status, why: why,
                answer: response)
        }
        context.fireErrorCaught(error)
    }
}
