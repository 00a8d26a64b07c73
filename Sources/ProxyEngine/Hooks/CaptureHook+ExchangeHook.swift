import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The capture as a hook: a request head opens the exchange's row in its
/// flow, each step fills it in, and its end hands it to the sink.
extension CaptureHook: ExchangeHook {
    var wantsBodies: Bool { true }

    /// After the rules: the row shows the request as it went on.
    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) {
        guard let eventLoop = flow.eventLoop else { return }
        var row = ExchangeCapture(
            writer: writer, head: head, target: flow.target, originForm: flow.originForm, scheme: flow.route.scheme,
            tlsMode: flow.route.tlsMode, client: flow.origin.client, peer: flow.peer, eventLoop: eventLoop)
        row.record.resentFrom = flow.origin.resentFrom
        if case .intercepted = flow.route {
            row.record.sni = flow.origin.clientSNI
            if let hello = flow.origin.reusedUpstreamHello { row.tls(hello, doneAt: nil) }
        }
        flow.row = row
    }

    func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {
        // A held part is recorded as it goes on (or is aborted), not as it is read.
        if fate != .held { flow.row?.requestBodyPart(part) }
    }

    func requestTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow) {
        flow.row?.record.requestTrailers = ExchangeRecord.encodeHeaders(trailers.map { ($0.name, $0.value) })
    }

    func requestEdited(_ request: ClientRequest, _ flow: inout ExchangeFlow) {
        flow.row?.requestEdited(request.head, target: request.target, originForm: request.originForm)
    }

    func upstreamConnected(to server: SocketAddress?, _ flow: inout ExchangeFlow) { flow.row?.connected(to: server) }

    func upstreamTLS(_ hello: TLSHello?, doneAt: Date?, _ flow: inout ExchangeFlow) { flow.row?.tls(hello, doneAt: doneAt) }

    func responseHeadSent(_ head: HTTPResponseHead, _ flow: inout ExchangeFlow) { flow.row?.responseHead(head) }

    func responseBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) { flow.row?.responseBodyPart(part) }

    func responseTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow) {
        flow.row?.record.responseTrailers = ExchangeRecord.encodeHeaders(trailers.map { ($0.name, $0.value) })
    }

    func answered(_ status: HTTPResponseStatus, _ flow: inout ExchangeFlow) { flow.row?.answered(status) }

    /// Status, headers and (but to a HEAD request) body, as sent.
    func answered(_ local: LocalResponse, headRequest: Bool, _ flow: inout ExchangeFlow) {
        flow.row?.responseHead(local.head)
        if !headRequest, let body = local.body { flow.row?.responseBodyPart(body) }
    }

    /// The row goes to the sink, which commits it once its body files are closed.
    func ended(error: String?, _ flow: inout ExchangeFlow) {
        guard let row = flow.row else { return }
        flow.row = nil
        row.submit(error: error, notes: flow.notes, rules: flow.plan.applied)
    }

    /// The handshake's row goes now, open; its messages follow it, and its
    /// end (with the bytes each way) comes at the close.
    func webSocketOpened(_ handshake: WebSocketHandshake, _ flow: inout ExchangeFlow) -> (any WebSocketObserver)? {
        guard let handshakeRow = flow.row, let eventLoop = flow.eventLoop else { return nil }
        flow.row = nil
        let requestID = handshakeRow.record.requestID
        handshakeRow.submit(notes: flow.notes, rules: flow.plan.applied, open: true)
        writer.submit(
            .opened(WebSocketEvent.Opened(requestID: requestID, at: Date(), tunnelPID: Int(getpid()), extensions: handshake.extensions)))
        return WebSocketCapture(writer: writer, requestID: requestID, eventLoop: eventLoop)
    }

    /// The handshake's row is written when both sides have closed, with the
    /// bytes that went each way.
    func switched(client: Channel, server: Channel, counts: TunnelByteCounts, _ flow: inout ExchangeFlow) {
        guard let handshake = flow.row else { return }
        flow.row = nil
        let (notes, rules) = (flow.notes, flow.plan.applied)
        client.closeFuture.and(server.closeFuture).whenComplete { _ in
            var closed = handshake
            closed.record.bytesUp = counts.up.load(ordering: .relaxed)
            closed.record.bytesDown = counts.down.load(ordering: .relaxed)
            closed.submit(notes: notes, rules: rules)
        }
    }
}
