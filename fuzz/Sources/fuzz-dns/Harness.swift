// The DNS forwarder's parser (DNSMessage): every query a transparent
// client sends and every answer a server returns goes through it.
//
// Properties:
// - it never traps, whatever the bytes (pointer loops, counts beyond the
//   data, names over 255 bytes);
// - what it reads stays within what the header announces;
// - a reply it makes for a query is a response with the query's id and
//   question, which it reads back the same way;
// - answers and names render to text (the store's) without trapping.
import FuzzSupport

@testable import ProxyEngine

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        if let message = DNSMessage(parsing: bytes) {
            let questions = Int(bytes[4]) << 8 | Int(bytes[5])
            let answers = Int(bytes[6]) << 8 | Int(bytes[7])
            Fuzz.check(message.questions.count <= questions, "\(message.questions.count) questions read, \(questions) announced")
            Fuzz.check(message.answers.count <= answers, "\(message.answers.count) answers read, \(answers) announced")
            for question in message.questions {
                Fuzz.check(question.name.utf8.count <= 1024, "a name of \(question.name.utf8.count) bytes")
            }
            _ = message.answerTexts
            _ = message.questions.map { DNSMessage.typeName($0.type) }
            if !message.isResponse, let reply = DNSMessage.reply(toQuery: bytes, rcode: 2) {
                let back = DNSMessage(parsing: reply)
                Fuzz.check(
                    back?.isResponse == true && back?.id == message.id && back?.rcode == 2,
                    "the reply does not read back as a SERVFAIL for the query")
                Fuzz.check(back?.questions == message.questions, "the reply's question differs from the query's")
            }
        }
        _ = DNSMessage.rcodeName(bytes.first ?? 0)
    }
}
