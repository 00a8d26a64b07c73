import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The page, its files, the login that trades the token for the cookie,
/// and the CA for download.
struct PageRoutes<Context: RequestContext> {
    let session: WebSession
    let paths: GroupPaths

    func register(on router: Router<Context>) {
        router.get("/") { _, _ in asset("/index.html") }
        router.get("/login") { request, _ in login(request) }
        router.post("/api/logout") { _, _ in
            var response = WebJSON.ok()
            response.headers[.setCookie] = WebSession.clearCookie
            return response
        }
        for name in PageAssets.all.keys where name != "/index.html" && name != "/login.html" {
            router.get(RouterPath(name)) { _, _ in asset(name) }
        }
        router.get("/ca.pem") { _, _ in try caPEM() }
    }

    func asset(_ name: String) -> Response {
        guard let asset = PageAssets.all[name] else { return Response(status: .notFound) }
        return Response(
            status: .ok, headers: [.contentType: asset.type, .cacheControl: "no-cache"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }

    /// `/login?token=…`: the right token sets the cookie and goes to the
    /// page (the token leaves the address bar); anything else shows the form.
    func login(_ request: Request) -> Response {
        let query = QueryItems(request.uri.query)
        guard let token = query["token"] else { return asset("/login.html") }
        guard session.isToken(token.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            var response = asset("/login.html")
            response.status = .unauthorized
            return response
        }
        return Response(status: .seeOther, headers: [.location: "/", .setCookie: session.setCookie])
    }

    func caPEM() throws -> Response {
        guard let data = try? GroupFileReader.read(paths.caPEM, limit: 1 << 20) else {
            return WebJSON.error(.notFound, "no CA yet: the supervisor creates ca.pem when it starts")
        }
        return Response(
            status: .ok,
            headers: [.contentType: "application/x-pem-file", .contentDisposition: "attachment; filename=\"busymate-ca.pem\""],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}
