import NIOHTTP1

/// What a `101` agreed on, as far as the WebSocket layer cares: that it is
/// a WebSocket, and the extensions the server accepted. Only
/// `permessage-deflate` (RFC 7692) is understood; a socket with any other
/// extension is glued byte for byte, as its frames may mean what we cannot read.
struct WebSocketHandshake: Equatable {
    /// `Sec-WebSocket-Extensions` as the server sent it (nil: none).
    var extensions: String?
    var deflate: Bool

    /// Nil: not a WebSocket, or one whose frames we cannot follow (`why`).
    static func parse(request: HTTPHeaders, response: HTTPResponseHead) -> Result<WebSocketHandshake, Unreadable>? {
        guard response.status == .switchingProtocols,
            response.headers["upgrade"].contains(where: { $0.lowercased().trimmingSpaces == "websocket" }),
            request["upgrade"].contains(where: { $0.lowercased().split(separator: ",").contains { $0.trimmingSpaces == "websocket" } })
        else { return nil }
        let values = response.headers["sec-websocket-extensions"]
        let extensions = values.isEmpty ? nil : values.joined(separator: ", ")
        var deflate = false
        for offer in values.flatMap({ $0.split(separator: ",") }) {
            let name = offer.split(separator: ";").first.map { $0.trimmingSpaces.lowercased() } ?? ""
            if name.isEmpty { continue }
            guard name == "permessage-deflate", !deflate else { return .failure(Unreadable(extensions: extensions ?? "")) }
            deflate = true
        }
        return .success(WebSocketHandshake(extensions: extensions, deflate: deflate))
    }

    /// RFC 7692 §7.1.1: the side (the client when `client`) resets its
    /// deflate window for every message.
    func noContextTakeover(client: Bool) -> Bool {
        guard deflate, let extensions else { return false }
        let name = client ? "client_no_context_takeover" : "server_no_context_takeover"
        return extensions.lowercased().split(whereSeparator: { $0 == ";" || $0 == "," }).contains { $0.trimmingSpaces == name }
    }

    struct Unreadable: Error, Equatable {
        var extensions: String
        var note: String { "the WebSocket's extensions (\(extensions)) are not understood: its bytes are passed on unread" }
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
