import BusymateShared
import Foundation
import Testing

@Suite struct JSONWriterTests {
    @Test(arguments: [
        "plain", "", "quote \" and backslash \\ and slash /", "line\nbreak\r\ttab", "\u{01}\u{1F}\u{7F}", "ünïcødé ✓ 🙂", "a\"b\\c\u{0}d",
    ])
    func stringsReadBackAsWritten(_ text: String) throws {
        let written = JSONWriter.compact(
            JSONNode(.array([JSONNode(.string(text)), JSONNode(.object([("k\"\(text)", JSONNode(.string(text)))]))])))
        let read = try #require(try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [Any])
        #expect(read.first as? String == text)
        #expect((read.last as? [String: String])?["k\"\(text)"] == text)
        #expect(try JSONSerialization.jsonObject(with: Data(JSONWriter.quote(text).utf8), options: [.fragmentsAllowed]) as? String == text)
    }
}
