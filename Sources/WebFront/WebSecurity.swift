import Foundation
import HTTPTypes
import Hummingbird

/// Every route but the login needs the session cookie (or the token as a
/// bearer, for scripts); a state-changing request from a browser must come
/// from the page itself. Every answer carries the page's strict policy.
struct WebSecurity<Context: RequestContext>: RouterMiddleware {
    let session: WebSession

    static var contentSecurityPolicy: String {
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
            + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
    }

    /// Reachable without a session: the login page and what it shows.
    static func isPublic(_ path: String) -> Bool { PageAssets.forLogin.contains(path) }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        switch authorize(request) {
        case .allowed:
            do {
                response = try await next(request, context)
            } catch let error as any HTTPResponseError {
                response = try error.response(from: request, context: context)
            }
        case let .refused(status, message):
            response = Self.refusal(request, status: status, message: message)
        }
        Self.secure(&response.headers, path: request.uri.path)
        return response
    }

    enum Decision: Equatable {
        case allowed
        case refused(HTTPResponse.Status, String)
    }

    func authorize(_ request: Request) -> Decision {
        let path = request.uri.path
        if Self.isPublic(path) { return .allowed }
        var bearer = false
        if let cookie = WebSession.cookie(in: request.headers[values: .cookie]), session.isCookie(cookie) {
            // A browser's session.
        } else if let auth = request.headers[.authorization], auth.prefix(7).lowercased() == "bearer ",
            session.isToken(auth.dropFirst(7).trimmingCharacters(in: .whitespaces))
        {
            bearer = true
        } else {
            return .refused(.unauthorized, "this page needs its token: open the URL `busymate web url` prints")
        }
        let changes = ![.get, .head, .options].contains(request.method)
        // A WebSocket is no navigation: the cookie goes along from any page
        // on the same host (another port is the same site), so it must be
        // the page's own, as a state-changing request must.
        let socket = request.headers[.upgrade]?.lowercased() == "websocket"
        if (changes || socket) && !bearer && !Self.sameOrigin(request) {
            return .refused(.forbidden, "refused a cross-site request")
        }
        return .allowed
    }

    /// `Sec-Fetch-Site` when the browser sends it; else `Origin` must name
    /// this host. A request with neither is no browser's: refused too.
    static func sameOrigin(_ request: Request) -> Bool {
        if let site = request.headers[.secFetchSite] {
            return site == "same-origin"
        }
        guard let origin = request.headers[.origin], let host = request.head.authority else { return false }
        return origin == "http://\(host)" || origin == "https://\(host)"
    }

    static func refusal(_ request: Request, status: HTTPResponse.Status, message: String) -> Response {
        let path = request.uri.path
        if status == .unauthorized && !path.hasPrefix("/api/") && request.method == .get {
            return Response(status: .seeOther, headers: [.location: "/login"])
        }
        return WebJSON.error(status, message)
    }

    static func secure(_ headers: inout HTTPFields, path: String) {
        if headers[.contentSecurityPolicy] == nil { headers[.contentSecurityPolicy] = contentSecurityPolicy }
        headers[.xContentTypeOptions] = "nosniff"
        headers[.referrerPolicy] = "no-referrer"
        headers[.xFrameOptions] = "DENY"
        headers[.crossOriginOpenerPolicy] = "same-origin"
        headers[.crossOriginResourcePolicy] = "same-origin"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "no-store" }
    }
}

extension HTTPField.Name {
    // Names HTTPTypes has no constant for; each literal is a valid token.
    static let secFetchSite = Self("Sec-Fetch-Site") ?? .origin
    static let referrerPolicy = Self("Referrer-Policy") ?? .xContentTypeOptions
    static let xFrameOptions = Self("X-Frame-Options") ?? .xContentTypeOptions
    static let crossOriginOpenerPolicy = Self("Cross-Origin-Opener-Policy") ?? .crossOriginResourcePolicy
}
