import BusymateShared
import CaptureStore
import Foundation
import Hummingbird

/// `/api/held`: what breakpoints hold, and their resolution, through the
/// same path as `busymate breakpoints continue|abort`.
struct HeldRoutes<Context: RequestContext> {
    let reader: CaptureReader

    func register(on router: Router<Context>) {
        router.get("/api/held") { _, _ in
            let held = try await reader.read { try $0.breakpoints.held() }
            return WebJSON.response(ExchangeJSON.object([("held", ExchangeJSON.array(held.map(HeldJSON.node)))]))
        }
        router.post("/api/held/:id") { request, context in try await resolve(request, context) }
    }

    /// `{"action": "continue"|"abort", "raw": "…"}`: an edit that is not
    /// HTTP is refused (422, with its line) and the message stays held.
    func resolve(_ request: Request, _ context: Context) async throws -> Response {
        guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not a breakpoint id") }
        guard let body = try await WebJSON.body(request), case let .string(action)? = body["action"]?.value,
            ["continue", "abort"].contains(action)
        else {
            return WebJSON.error(.badRequest, #"expected {"action": "continue"} (with "raw" for an edit) or {"action": "abort"}"#)
        }
        if let refused = WebJSON.unknownKey(body, allowed: ["action", "raw"], in: "a held message's resolution") { return refused }
        let edited: Data? = if case let .string(raw)? = body["raw"]?.value { Data(raw.utf8) } else { nil }
        let paths = reader.paths
        do {
            let outcome = try await reader.read(writing: true) { repos -> BreakpointEvent.Outcome in
                let event = try HeldMessageResolution.held(id, in: repos.breakpoints)
                if action == "abort" {
                    return try HeldMessageResolution.resolve(event, .abort, repository: repos.breakpoints, paths: paths, sender: "web")
                }
                // The page sends HTTP back as shown (CRLFs may have become LFs); a WebSocket message, byte for byte.
                let unchanged =
                    edited.map { event.kind.isMessage ? $0 == event.rawHTTPInitial : Self.sameMessage($0, event.rawHTTPInitial) } ?? true
                guard let edited, !unchanged else {
                    return try HeldMessageResolution.resolve(event, .continue, repository: repos.breakpoints, paths: paths, sender: "web")
                }
                try HeldMessageResolution.check(edited, replacing: event)
                return try HeldMessageResolution.resolve(
                    event, .edit, raw: edited, repository: repos.breakpoints, paths: paths, sender: "web")
            }
            return WebJSON.ok([("outcome", ExchangeJSON.string(outcome.rawValue))])
        } catch let failure as HeldMessageResolution.Failure {
            let status: HTTPResponse.Status = failure.line != nil ? .unprocessableContent : .conflict
            return WebJSON.error(status, failure.description, failure.line.map { [("line", ExchangeJSON.number($0))] } ?? [])
        }
    }

    /// Equal but for line ends.
    static func sameMessage(_ a: Data, _ b: Data) -> Bool {
        func lf(_ d: Data) -> [UInt8] { Array(d).filter { $0 != 0x0D } }
        return a == b || lf(a) == lf(b)
    }
}
