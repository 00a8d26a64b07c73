import BusymateShared
import CaptureStore
import Foundation
import Hummingbird

/// Marks and comments from the page, as `busymate mark` and `comment` set
/// them: `PUT /api/exchanges/:id/annotation` with `{"marker": "default" | null,
/// "comment": "…" | null}`; a key left out is left as it is.
struct AnnotationRoutes<Context: RequestContext> {
    let reader: CaptureReader

    func register(on router: Router<Context>) {
        router.put("/api/exchanges/:id/annotation") { request, context in
            guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not an exchange id") }
            guard let sent = try await WebJSON.body(request, limit: 64 << 10), case let .object(members) = sent.value else {
                return WebJSON.error(.badRequest, #"expected {"marker": "default" or null, "comment": "…" or null}"#)
            }
            let change: AnnotationRepository.Change
            switch Self.change(members) {
            case let .success(parsed): change = parsed
            case let .failure(problem): return WebJSON.error(.badRequest, problem.description)
            }
            if let invalid = Self.invalid(change) { return WebJSON.error(.unprocessableContent, invalid) }
            let record = try await reader.read(writing: true) { repos -> ExchangeRecord? in
                try AnnotationRepository(database: repos.traffic.database).annotate([id], change)
                return try repos.traffic.find(id: id)
            }
            guard let record else { return WebJSON.error(.notFound, "no exchange \(id)") }
            return WebJSON.ok([
                ("id", ExchangeJSON.number(record.id)), ("marker", ExchangeJSON.string(record.marker)),
                ("comment", ExchangeJSON.string(record.comment)),
            ])
        }
    }

    static func invalid(_ change: AnnotationRepository.Change) -> String? {
        do {
            try AnnotationRepository.validate(change)
            return nil
        } catch {
            return error.description
        }
    }

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// The change the members ask for; an unknown key, or a value that is
    /// neither text nor null, is refused by name.
    static func change(_ members: [(key: String, node: JSONNode)]) -> Result<AnnotationRepository.Change, Problem> {
        var change = AnnotationRepository.Change()
        for (key, node) in members {
            let value: String?
            switch node.value {
            case let .string(text): value = text
            case .null: value = nil
            default: return .failure(Problem(description: "\(key) is text or null, not \(node.value.typeName)"))
            }
            switch key {
            case "marker": change.marker = .some(value)
            case "comment": change.comment = .some(value)
            default: return .failure(Problem(description: "unknown key \"\(key)\": an annotation has marker and comment"))
            }
        }
        guard !change.isEmpty else { return .failure(Problem(description: "give marker, comment or both")) }
        return .success(change)
    }
}
