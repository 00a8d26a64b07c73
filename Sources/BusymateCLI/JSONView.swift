import BusymateShared

/// JSON bodies pretty-printed from their own bytes: keys in the order they
/// came, numbers as written (`1.0` stays `1.0`), strings as sent. A
/// decode-and-encode would sort keys and rewrite numbers.
enum JSONView {
    /// Nil when the text is not one JSON document (it is then shown as is).
    static func pretty(_ text: String) -> String? {
        guard let node = try? JSONParser.parse(text) else { return nil }
        var out = JSONWriter.write(node)
        if out.hasSuffix("\n") { out.removeLast() }
        return out
    }
}
