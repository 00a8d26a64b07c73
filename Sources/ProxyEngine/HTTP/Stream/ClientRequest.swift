import NIOHTTP1

/// A request as the client sent it (after the rules' header edits or a
/// breakpoint's edit): its head, where it goes and its origin-form path.
/// What goes upstream is made from it (`UpstreamRequest`).
struct ClientRequest {
    var head: HTTPRequestHead
    var target: ProxyTarget
    var originForm: String
}
