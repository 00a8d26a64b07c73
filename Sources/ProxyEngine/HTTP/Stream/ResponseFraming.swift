import BusymateShared
import CaptureStore
import NIOHTTP1

/// A response head as the client gets it, given the framing the exchange
/// state machine chose.
enum ResponseFraming {
    static func clientHead(
        _ upstream: HTTPResponseHead, framing: StreamStateMachine.Framing, close: Bool, clientIsHTTP10: Bool,
        upgrade: String? = nil
    ) -> HTTPResponseHead {
        var headers = upstream.headers
        HopByHop.strip(&headers)
        if upstream.status == .switchingProtocols {
            headers.add(name: "Connection", value: "Upgrade")
            headers.add(name: "Upgrade", value: upstream.headers["upgrade"].first ?? upgrade ?? "")
            return HTTPResponseHead(version: .http1_1, status: upstream.status, headers: headers)
        }
        switch framing {
        case .bodyless: headers.remove(name: "transfer-encoding")
        case .asIs: if headers.contains(name: "transfer-encoding") { headers.remove(name: "content-length") }
        case .chunked: headers.add(name: "Transfer-Encoding", value: "chunked")
        case .closeDelimited: break
        }
        if upstream.status.code >= 200 {
            if close {
                headers.replaceOrAdd(name: "Connection", value: "close")
            } else if clientIsHTTP10 {
                headers.replaceOrAdd(name: "Connection", value: "keep-alive")
            }
        }
        return HTTPResponseHead(version: .http1_1, status: upstream.status, headers: headers)
    }
}
