import Foundation

/// A Phoenix channel message at `vsn=1.0.0`: a JSON object
/// `{topic, event, payload, ref, join_ref}`. Realtime sends `ref: null`
/// for what it pushes unasked (broadcasts, presence, system messages).
struct PhoenixMessage: Sendable, Equatable {
    var topic: String
    var event: String
    /// The payload as JSON text (an object).
    var payload: String
    var ref: String?
    var joinRef: String?

    init(topic: String, event: String, payload: String = "{}", ref: String? = nil, joinRef: String? = nil) {
        self.topic = topic
        self.event = event
        self.payload = payload
        self.ref = ref
        self.joinRef = joinRef
    }

    /// The message as sent: the payload is spliced in as JSON, not re-encoded.
    var text: String {
        func quoted(_ s: String?) -> String {
            guard let s else { return "null" }
            return (try? JSONSerialization.data(withJSONObject: s, options: [.fragmentsAllowed])).map {
                String(decoding: $0, as: UTF8.self)
            } ?? "null"
        }
        return
            "{\"topic\":\(quoted(topic)),\"event\":\(quoted(event)),\"payload\":\(payload),\"ref\":\(quoted(ref)),\"join_ref\":\(quoted(joinRef))}"
    }

    /// A message from the server; nil for anything that is not one (Phoenix drops those too).
    init?(text: String) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any],
            let topic = object["topic"] as? String, let event = object["event"] as? String
        else { return nil }
        self.topic = topic
        self.event = event
        let payload = object["payload"] as? [String: Any] ?? [:]
        self.payload = Self.json(payload)
        // Refs are strings from the JS and Swift clients; a number is accepted as its text.
        ref = Self.text(object["ref"])
        joinRef = Self.text(object["join_ref"])
    }

    /// The payload as an object.
    var object: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any]) ?? [:] }

    static func json(_ object: Any) -> String {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    private static func text(_ value: Any?) -> String? {
        switch value {
        case let s as String: return s
        case let n as NSNumber: return n.stringValue
        default: return nil
        }
    }
}
