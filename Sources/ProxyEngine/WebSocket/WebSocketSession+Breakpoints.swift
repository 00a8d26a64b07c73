import CaptureStore
import Foundation
import NIOCore
import NIOWebSocket

/// Messages held at breakpoints (`breakpoints.messages_from_client`,
/// `…_from_server`): a matching message is read whole, then paused while
/// its direction waits (what comes after it is kept in order, and that side
/// is not read further); the other direction keeps flowing.
extension WebSocketSession {
    func route(_ frame: WebSocketFrame, _ step: WebSocketStep, fromClient: Bool) {
        if var hold = fromClient ? holds.client : holds.server {
            if !hold.complete, case let .fragment(fragment) = step {
                hold.add(frame, fragment)
                settle(hold, fromClient: fromClient)
            } else {
                hold.after.append((frame, step))
                setHold(hold, fromClient: fromClient)
            }
            return
        }
        if case let .fragment(fragment) = step, fragment.first, let breakpoints, requestID != nil, !breakpoints.isEmpty,
            breakpoints.holds(fromClient ? .messageFromClient : .messageFromServer, url, exchange: nil)
        {
            var hold = WebSocketHold(first: fragment)
            hold.add(frame, fragment)
            settle(hold, fromClient: fromClient)
            return
        }
        deliver(frame, step, fromClient: fromClient)
    }

    /// A fragment more of the held message: paused once whole; too large to
    /// hold (as an HTTP body would be), it goes on.
    private func settle(_ hold: WebSocketHold, fromClient: Bool) {
        setHold(hold, fromClient: fromClient)
        if hold.payload.readableBytes > BreakpointController.maxHeldBytes {
            release(.forward, fromClient: fromClient)
        } else if hold.complete {
            pause(hold, fromClient: fromClient)
        }
    }

    private func setHold(_ hold: WebSocketHold?, fromClient: Bool) {
        if fromClient { holds.client = hold } else { holds.server = hold }
    }

    private func pause(_ hold: WebSocketHold, fromClient: Bool) {
        guard let breakpoints, let requestID else {
            release(.forward, fromClient: fromClient)
            return
        }
        // A compressed message whose sender keeps its window: the receiver's window needs it as it was.
        let editable = !hold.compressed || (fromClient ? freshWindow.client : freshWindow.server)
        let session = NIOLoopBound(self, eventLoop: eventLoop)
        breakpoints.pauseMessage(
            Data(hold.payload.readableBytesView), text: hold.opcode == .text, editable: editable, fromClient: fromClient,
            requestID: requestID, url: url, on: eventLoop
        ).whenSuccess { resolution in
            session.value.release(resolution, fromClient: fromClient)
        }
    }

    /// Carries out a resolution, then lets what came after the message through.
    func release(_ resolution: MessageResolution, fromClient: Bool) {
        guard state == .open, let hold = fromClient ? holds.client : holds.server else { return }
        setHold(nil, fromClient: fromClient)
        switch resolution {
        case .forward:
            for (frame, fragment) in hold.frames {
                observer?.fragment(fragment, fromClient: fromClient)
                write(frame, toClient: !fromClient)
            }
        case let .edited(data):
            let payload = ByteBuffer(bytes: data)
            let frame = WebSocketFrame(
                fin: true, opcode: hold.opcode == .text ? .text : .binary, maskKey: fromClient ? .random() : nil, data: payload)
            _ = observer?.message(hold.opcode, payload, fromClient: fromClient, origin: .edited)
            write(frame, toClient: !fromClient)
        case .drop:
            _ = observer?.message(hold.opcode, hold.payload, fromClient: fromClient, origin: .dropped)
        case .gone:
            return
        }
        if hold.complete { sendWaitingInjections(fromClient: fromClient) }
        // What came after goes through again (a message among it may be held in its turn).
        for (frame, step) in hold.after { route(frame, step, fromClient: fromClient) }
        if var again = fromClient ? holds.client : holds.server {
            // Held again: the side's end waits behind that one.
            if let end = hold.end, again.end != .closed { again.end = end }
            setHold(again, fromClient: fromClient)
            partner(of: fromClient)?.flush()
            observer?.readComplete()
            return
        }
        partner(of: fromClient)?.flush()
        observer?.readComplete()
        switch hold.end {
        case .inputClosed?: inputClosed(fromClient: fromClient)
        case .closed?: closePartner(of: fromClient)
        case nil: (fromClient ? client : server)?.resume()
        }
    }

    /// The side whose message is held ended (`end`): kept until the message has gone.
    func deferEnd(_ end: WebSocketHold.End, fromClient: Bool) -> Bool {
        guard var hold = fromClient ? holds.client : holds.server else { return false }
        // A close outranks a FIN.
        if hold.end != .closed { hold.end = end }
        setHold(hold, fromClient: fromClient)
        return true
    }
}
