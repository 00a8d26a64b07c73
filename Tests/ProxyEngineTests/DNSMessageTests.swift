import Testing

@testable import ProxyEngine

@Suite struct DNSMessageTests {
    // Captured: a query for www.github.com AAAA (python socket, RD) and the
    // NXDOMAIN the resolver sent back.
    static let capturedQuery: [UInt8] = [
        18, 52, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 119, 119, 119, 6, 103, 105, 116, 104, 117, 98, 3, 99, 111, 109, 0, 0, 28, 0, 1,
    ]
    static let capturedNXDomain: [UInt8] = [
        18, 52, 129, 131, 0, 1, 0, 0, 0, 0, 0, 0, 3, 119, 119, 119, 6, 103, 105, 116, 104, 117, 98, 3, 99, 111, 109, 0, 0, 28, 0, 1,
    ]
    // Written the way servers compress (every suffix already written is
    // pointed to, case-insensitively): www.GitHub.com A, a CNAME to
    // github.com (a pointer into the question, so "GitHub.com") and its A.
    static let cnameAndA: [UInt8] = [
        138, 31, 129, 128, 0, 1, 0, 2, 0, 0, 0, 0, 3, 119, 119, 119, 6, 71, 105, 116, 72, 117, 98, 3, 99, 111, 109, 0, 0, 1, 0, 1, 192, 12,
        0, 5, 0, 1, 0, 0, 14, 16, 0, 2, 192, 16, 192, 16, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 140, 82, 121, 4,
    ]
    // v6.example AAAA: fd77:2::2, ::1, 2001:db8:0:0:1:0:0:1, 2001:db8:0:1:1:1:1:1, ::ffff:192.0.2.1.
    static let aaaa: [UInt8] = [
        1, 2, 129, 128, 0, 1, 0, 5, 0, 0, 0, 0, 2, 118, 54, 7, 101, 120, 97, 109, 112, 108, 101, 0, 0, 28, 0, 1, 192, 12, 0, 28, 0, 1, 0, 0,
        1, 44, 0, 16, 253, 119, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 192, 12, 0, 28, 0, 1, 0, 0, 1, 44, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 1, 192, 12, 0, 28, 0, 1, 0, 0, 1, 44, 0, 16, 32, 1, 13, 184, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 192, 12, 0,
        28, 0, 1, 0, 0, 1, 44, 0, 16, 32, 1, 13, 184, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 192, 12, 0, 28, 0, 1, 0, 0, 1, 44, 0, 16, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 255, 255, 192, 0, 2, 1,
    ]
    // example.org MX (AA set): MX 10 mail.example.org, a TYPE99 of 12 bytes, an HTTPS of 10.
    static let mxAndOthers: [UInt8] = [
        66, 66, 133, 128, 0, 1, 0, 3, 0, 0, 0, 0, 7, 101, 120, 97, 109, 112, 108, 101, 3, 111, 114, 103, 0, 0, 15, 0, 1, 192, 12, 0, 15, 0,
        1, 0, 1, 81, 128, 0, 9, 0, 10, 4, 109, 97, 105, 108, 192, 12, 192, 12, 0, 99, 0, 1, 0, 0, 0, 5, 0, 12, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
        10, 11, 192, 12, 0, 65, 0, 1, 0, 0, 0, 5, 0, 10, 0, 1, 0, 0, 1, 0, 3, 2, 104, 50,
    ]
    static let valid = [capturedQuery, capturedNXDomain, cnameAndA, aaaa, mxAndOthers]

    static func header(id: UInt16 = 0x1234, flags: UInt16, questions: UInt16, answers: UInt16 = 0, additional: UInt16 = 0) -> [UInt8] {
        [id, flags, questions, answers, 0, additional].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    static func name(_ labels: [[UInt8]]) -> [UInt8] {
        labels.flatMap { [UInt8($0.count)] + $0 } + [0]
    }

    static func name(_ text: String) -> [UInt8] {
        name(text.split(separator: ".").map { Array($0.utf8) })
    }

    @Test func aCapturedQueryAndNXDomainReply() throws {
        let query = try #require(DNSMessage(parsing: Self.capturedQuery))
        #expect(
            query
                == DNSMessage(
                    id: 0x1234, isResponse: false, opcode: 0, rcode: 0, truncated: false,
                    questions: [.init(name: "www.github.com", type: 28, qclass: 1)], answers: []))
        let reply = try #require(DNSMessage(parsing: Self.capturedNXDomain))
        #expect(reply.isResponse && reply.rcode == 3 && reply.answers.isEmpty)
        #expect(DNSMessage.rcodeName(reply.rcode) == "NXDOMAIN")
        // What the resolver sent is exactly what reply(toQuery:) makes.
        #expect(DNSMessage.reply(toQuery: Self.capturedQuery, rcode: 3) == Self.capturedNXDomain)
    }

    @Test func compressionPointersInOwnersAndRdata() throws {
        let message = try #require(DNSMessage(parsing: Self.cnameAndA))
        #expect(message.id == 0x8A1F && message.isResponse && message.opcode == 0 && message.rcode == 0 && !message.truncated)
        #expect(message.questions == [.init(name: "www.GitHub.com", type: 1, qclass: 1)])
        #expect(
            message.answers == [
                .init(name: "www.GitHub.com", type: 5, ttl: 3600, data: .name("GitHub.com")),
                .init(name: "GitHub.com", type: 1, ttl: 60, data: .a("140.82.121.4")),
            ])
        #expect(message.answerTexts == ["CNAME GitHub.com", "140.82.121.4"])
    }

    @Test func aaaaAnswersAreCanonicalText() throws {
        let message = try #require(DNSMessage(parsing: Self.aaaa))
        #expect(message.answers.allSatisfy { $0.name == "v6.example" && $0.type == 28 && $0.ttl == 300 })
        #expect(message.answerTexts == ["fd77:2::2", "::1", "2001:db8::1:0:0:1", "2001:db8:0:1:1:1:1:1", "::ffff:192.0.2.1"])
    }

    @Test func ipv6TextFollowsRFC5952() {
        func text(_ groups: [UInt16]) -> String? {
            DNSMessage.ipv6Text(groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })
        }
        #expect(text([0, 0, 0, 0, 0, 0, 0, 0]) == "::")
        #expect(text([0, 0, 0, 0, 0, 0, 0, 1]) == "::1")
        #expect(text([1, 0, 0, 0, 0, 0, 0, 0]) == "1::")
        #expect(text([0xFD77, 2, 0, 0, 0, 0, 0, 2]) == "fd77:2::2")
        #expect(text([0x2001, 0xDB8, 0, 0, 1, 0, 0, 1]) == "2001:db8::1:0:0:1")
        // One zero group is not shortened; the longer run wins, the first on a tie.
        #expect(text([0x2001, 0xDB8, 0, 1, 1, 1, 1, 1]) == "2001:db8:0:1:1:1:1:1")
        #expect(text([1, 0, 0, 2, 0, 0, 0, 3]) == "1:0:0:2::3")
        #expect(text([0xABCD, 0x00EF, 0x0A00, 0, 0, 0, 0, 0xFFFF]) == "abcd:ef:a00::ffff")
        #expect(text([0, 0, 0, 0, 0, 0xFFFF, 0xC000, 0x0201]) == "::ffff:192.0.2.1")
        #expect(DNSMessage.ipv6Text([UInt8](repeating: 0, count: 15)) == nil)
        #expect(DNSMessage.ipv4Text([10, 0, 0, 255]) == "10.0.0.255")
    }

    @Test func mxUnknownTypesAndHTTPS() throws {
        let message = try #require(DNSMessage(parsing: Self.mxAndOthers))
        #expect(message.answers.first?.data == .mx(preference: 10, exchange: "mail.example.org"))
        #expect(message.answers.dropFirst().first?.data == .other(Array(0..<12)))
        #expect(message.answerTexts == ["MX 10 mail.example.org", "TYPE99 (12 bytes)", "HTTPS (10 bytes)"])
    }

    @Test func rdataOfTheWrongShapeIsKeptRaw() throws {
        // An A of 3 bytes; a CNAME whose name runs past its rdata (into the
        // next owner's root label); a PTR pointing out of the message.
        let bytes =
            Self.header(flags: 0x8180, questions: 0, answers: 3)
            + [0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 3, 1, 2, 3]
            + [0, 0, 5, 0, 1, 0, 0, 0, 1, 0, 2, 1, 0x61, 0]
            + [0, 12, 0, 1, 0, 0, 0, 1, 0, 2, 0xFF, 0xFF]
        let message = try #require(DNSMessage(parsing: bytes))
        #expect(message.answerTexts == ["A (3 bytes)", "CNAME (2 bytes)", "PTR (2 bytes)"])
        #expect(message.answers.map(\.name) == [".", ".", "."])
    }

    @Test func namesAreKeptAsSentWithOddBytesEscaped() throws {
        let bytes =
            Self.header(flags: 0, questions: 2) + Self.name([Array("a.b\\".utf8) + [0x20, 0xFF], Array("Ex".utf8)]) + [0, 1, 0, 1]
            + [0] + [0, 2, 0, 1]
        let message = try #require(DNSMessage(parsing: bytes))
        #expect(message.questions.map(\.name) == ["a\\.b\\\\\\032\\255.Ex", "."])
        #expect(message.questions.map(\.type) == [1, 2])
    }

    @Test func aPointerLoopIsRefused() {
        // To itself; to each other; out of range; reserved label types.
        #expect(DNSMessage(parsing: Self.header(flags: 0, questions: 1) + [0xC0, 12, 0, 1, 0, 1]) == nil)
        #expect(DNSMessage(parsing: Self.header(flags: 0, questions: 1) + [0xC0, 14, 0xC0, 12, 0, 1, 0, 1]) == nil)
        #expect(DNSMessage(parsing: Self.header(flags: 0, questions: 1) + [0xC0, 200, 0, 1, 0, 1]) == nil)
        #expect(DNSMessage(parsing: Self.header(flags: 0, questions: 1) + [0x41, 0x61, 0, 0, 1, 0, 1]) == nil)
        #expect(DNSMessage(parsing: Self.header(flags: 0, questions: 1) + [0x81, 0x61, 0, 0, 1, 0, 1]) == nil)
    }

    @Test func pointerChainsStopAt128Jumps() throws {
        // Question 0 is "a"; question i points to question i-1, so its name takes i jumps.
        func chain(_ count: Int) -> [UInt8] {
            var bytes = Self.header(flags: 0, questions: UInt16(count)) + [1, 0x61, 0, 0, 1, 0, 1]
            var previous = 12
            for _ in 1..<count {
                let here = bytes.count
                bytes += [0xC0 | UInt8(previous >> 8), UInt8(previous & 0xFF), 0, 1, 0, 1]
                previous = here
            }
            return bytes
        }
        let longest = try #require(DNSMessage(parsing: chain(129)))
        #expect(longest.questions.count == 129 && longest.questions.allSatisfy { $0.name == "a" })
        #expect(DNSMessage(parsing: chain(130)) == nil)
    }

    @Test func namesStopAt255Bytes() throws {
        let label = [UInt8](repeating: 0x61, count: 63)
        let longest = Self.header(flags: 0, questions: 1) + Self.name([label, label, label, Array(label.prefix(61))]) + [0, 1, 0, 1]
        #expect(try #require(DNSMessage(parsing: longest)).questions.first?.name.count == 253)
        let tooLong = Self.header(flags: 0, questions: 1) + Self.name([label, label, label, Array(label.prefix(62))]) + [0, 1, 0, 1]
        #expect(DNSMessage(parsing: tooLong) == nil)
    }

    @Test func countsBeyondTheData() throws {
        var more = Self.cnameAndA
        more[7] = 3
        #expect(DNSMessage(parsing: more) == nil)
        more[5] = 0xFF
        #expect(DNSMessage(parsing: more) == nil)
        // Unless the header says truncated: the answers that are whole stay.
        var truncated = Self.cnameAndA
        truncated[2] |= 0x02
        truncated[7] = 3
        let message = try #require(DNSMessage(parsing: truncated))
        #expect(message.truncated && message.answers == DNSMessage(parsing: Self.cnameAndA)?.answers)
        #expect(DNSMessage(parsing: Self.header(flags: 0x8380, questions: 2) + Self.name("a") + [0, 1, 0, 1]) == nil)
    }

    @Test func everyPrefixOfAValidMessage() throws {
        for bytes in Self.valid {
            let whole = try #require(DNSMessage(parsing: bytes))
            for length in 0..<bytes.count {
                #expect(DNSMessage(parsing: bytes.prefix(length)) == nil, "prefix \(length)")
            }
            // With TC set, a prefix keeps the answers it holds whole.
            var truncated = bytes
            truncated[2] |= 0x02
            for length in 0...bytes.count {
                if let message = DNSMessage(parsing: truncated.prefix(length)) {
                    #expect(message.questions == whole.questions)
                    #expect(whole.answers.starts(with: message.answers))
                }
            }
        }
    }

    @Test func anyCollectionAndOffsetsFromItsStart() throws {
        let slice = ([0xEE, 0xEE] + Self.cnameAndA).dropFirst(2)
        #expect(DNSMessage(parsing: slice) == DNSMessage(parsing: Self.cnameAndA))
        #expect(DNSMessage(parsing: Self.cnameAndA.lazy.map { $0 }) == DNSMessage(parsing: Self.cnameAndA))
    }

    @Test func replyToAQueryRoundTrips() throws {
        // Opcode 0 with RD and CD, two questions (the second compressed), an EDNS OPT.
        let query =
            Self.header(id: 0xABCD, flags: 0x0110, questions: 2, additional: 1)
            + Self.name("Example.com") + [0, 1, 0, 1] + [3, 0x77, 0x77, 0x77, 0xC0, 12, 0, 28, 0, 1]
            + [0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]
        let questionEnd = query.count - 11
        let reply = try #require(DNSMessage.reply(toQuery: query, rcode: 5))
        #expect(reply == Self.header(id: 0xABCD, flags: 0x8195, questions: 2) + query[12..<questionEnd])
        let parsed = try #require(DNSMessage(parsing: reply))
        #expect(parsed.id == 0xABCD && parsed.isResponse && parsed.rcode == 5 && parsed.answers.isEmpty)
        #expect(DNSMessage.rcodeName(parsed.rcode) == "REFUSED")
        #expect(parsed.questions == DNSMessage(parsing: query)?.questions)
        #expect(parsed.questions.map(\.name) == ["Example.com", "www.Example.com"])
        // Opcode kept, RD clear stays clear, only the low 4 bits of the rcode.
        let notify = Self.header(flags: 0x2000, questions: 1) + Self.name("a") + [0, 6, 0, 1]
        #expect(try #require(DNSMessage.reply(toQuery: notify, rcode: 0x12)).prefix(4) == [0x12, 0x34, 0xA0, 0x82])
    }

    @Test func noReplyToWhatIsNotAQuery() {
        #expect(DNSMessage.reply(toQuery: [], rcode: 2) == nil)
        #expect(DNSMessage.reply(toQuery: Array(Self.capturedQuery.prefix(11)), rcode: 2) == nil)
        #expect(DNSMessage.reply(toQuery: Array(Self.capturedQuery.dropLast()), rcode: 2) == nil)
        #expect(DNSMessage.reply(toQuery: Self.capturedNXDomain, rcode: 2) == nil)
        #expect(DNSMessage.reply(toQuery: Self.header(flags: 0, questions: 1) + [0xC0, 12, 0, 1, 0, 1], rcode: 2) == nil)
    }

    @Test func typeAndRcodeNames() {
        let types: [UInt16: String] = [
            1: "A", 28: "AAAA", 5: "CNAME", 15: "MX", 16: "TXT", 65: "HTTPS", 64: "SVCB",
            12: "PTR", 2: "NS", 6: "SOA", 33: "SRV", 255: "ANY", 65534: "TYPE65534", 99: "TYPE99",
        ]
        for (type, name) in types { #expect(DNSMessage.typeName(type) == name) }
        let rcodes: [UInt8: String] = [0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED", 12: "RCODE12"]
        for (rcode, name) in rcodes { #expect(DNSMessage.rcodeName(rcode) == name) }
    }

    @Test func mutatedMessagesNeverTrap() {
        // A small deterministic fuzz; the standalone harness runs a million.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: seed >> 33)
        }
        for round in 0..<20000 {
            var bytes = Self.valid[round % Self.valid.count]
            for _ in 0...(next() % 4) {
                switch next() % 3 {
                case 0: bytes[next() % bytes.count] = UInt8(truncatingIfNeeded: next())
                case 1: bytes.removeLast(min(bytes.count - 1, next() % 8))
                default: bytes.insert(0xC0, at: next() % bytes.count)
                }
            }
            if let message = DNSMessage(parsing: bytes) { _ = message.answerTexts }
            _ = DNSMessage.reply(toQuery: bytes, rcode: UInt8(truncatingIfNeeded: round))
        }
    }
}
