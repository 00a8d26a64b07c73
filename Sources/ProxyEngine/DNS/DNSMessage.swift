/// A DNS message (RFC 1035) as far as a proxy needs to log and answer it:
/// the header, the question section and the answer section. Authority and
/// additional records are not read.
///
/// The bytes come off the network, so parsing never traps: every read is
/// bounds-checked, compression pointers are followed at most
/// `maxPointerJumps` times and a name is at most 255 bytes on the wire, so
/// the work is bounded by a constant per byte of input.
struct DNSMessage: Sendable, Equatable {
    var id: UInt16
    var isResponse: Bool
    var opcode: UInt8
    /// The low 4 bits of the flags (extended rcodes in an OPT record are not read).
    var rcode: UInt8
    var truncated: Bool
    var questions: [Question]
    var answers: [Record]

    /// Names are kept as sent (case included) without the trailing dot; the
    /// root is ".". Label bytes other than printable ASCII are written
    /// `\DDD` (decimal) and a "." or "\" inside a label as `\.` or `\\`,
    /// as `dig` does, so a name always reads back unambiguously.
    struct Question: Sendable, Equatable {
        var name: String
        var type: UInt16
        var qclass: UInt16
    }

    struct Record: Sendable, Equatable {
        var name: String
        var type: UInt16
        var ttl: UInt32
        var data: RecordData
    }

    enum RecordData: Sendable, Equatable {
        /// Dotted quad.
        case a(String)
        /// RFC 5952 text, e.g. "fd77:2::2".
        case aaaa(String)
        /// The target of a CNAME, PTR, NS or DNAME.
        case name(String)
        case mx(preference: UInt16, exchange: String)
        /// Any other type, or rdata that does not have the shape its type
        /// calls for (an A that is not 4 bytes, a CNAME whose name does not
        /// read): the raw rdata.
        case other([UInt8])
    }

    static let maxPointerJumps = 128
    static let maxNameLength = 255

    init(id: UInt16, isResponse: Bool, opcode: UInt8, rcode: UInt8, truncated: Bool, questions: [Question], answers: [Record]) {
        self.id = id
        self.isResponse = isResponse
        self.opcode = opcode
        self.rcode = rcode
        self.truncated = truncated
        self.questions = questions
        self.answers = answers
    }

    /// Parses a whole message, e.g. a UDP payload, `[UInt8]`, `ArraySlice`
    /// or a ByteBuffer's `readableBytesView` (over TCP, without the 2-byte
    /// length prefix). Offsets in compression pointers count from the
    /// first element.
    ///
    /// nil when the bytes are not a DNS message this parser can read: fewer
    /// than 12 bytes, a question or answer running past the end, a bad name
    /// (an unknown label type, a pointer out of range, too many jumps, more
    /// than 255 bytes). One exception: when the header says the message was
    /// truncated (TC), the answers that read completely are kept and the
    /// rest dropped. Bytes after the answer section are not looked at.
    init?(parsing bytes: some Collection<UInt8>) {
        var reader = DNSReader(Array(bytes))
        guard let id = reader.u16(), let flags = reader.u16(), let questionCount = reader.u16(),
            let answerCount = reader.u16(), reader.u16() != nil, reader.u16() != nil
        else { return nil }
        self.id = id
        isResponse = flags & 0x8000 != 0
        opcode = UInt8(truncatingIfNeeded: flags >> 11) & 0x0F
        truncated = flags & 0x0200 != 0
        rcode = UInt8(truncatingIfNeeded: flags) & 0x0F
        questions = []
        answers = []
        // Each question takes at least 5 bytes and each record 11, so the
        // loops end when the bytes do, whatever the counts say.
        for _ in 0..<questionCount {
            guard let name = reader.name(), let type = reader.u16(), let qclass = reader.u16() else { return nil }
            questions.append(Question(name: name, type: type, qclass: qclass))
        }
        for _ in 0..<answerCount {
            guard let record = reader.record() else {
                if truncated { break }
                return nil
            }
            answers.append(record)
        }
    }

    /// Text for logs and the store; types without a name as "TYPE65534"
    /// (RFC 3597).
    static func typeName(_ type: UInt16) -> String {
        switch type {
        case 1: "A"
        case 2: "NS"
        case 5: "CNAME"
        case 6: "SOA"
        case 12: "PTR"
        case 15: "MX"
        case 16: "TXT"
        case 28: "AAAA"
        case 33: "SRV"
        case 35: "NAPTR"
        case 39: "DNAME"
        case 41: "OPT"
        case 43: "DS"
        case 46: "RRSIG"
        case 47: "NSEC"
        case 48: "DNSKEY"
        case 64: "SVCB"
        case 65: "HTTPS"
        case 255: "ANY"
        case 257: "CAA"
        default: "TYPE\(type)"
        }
    }

    /// IANA names of the header rcodes; others as "RCODE12".
    static func rcodeName(_ rcode: UInt8) -> String {
        switch rcode {
        case 0: "NOERROR"
        case 1: "FORMERR"
        case 2: "SERVFAIL"
        case 3: "NXDOMAIN"
        case 4: "NOTIMP"
        case 5: "REFUSED"
        case 6: "YXDOMAIN"
        case 7: "YXRRSET"
        case 8: "NXRRSET"
        case 9: "NOTAUTH"
        case 10: "NOTZONE"
        default: "RCODE\(rcode)"
        }
    }

    /// The answers as display text: "1.2.3.4", "fd77:2::2",
    /// "CNAME other.example", "MX 10 mail.example", "TYPE99 (12 bytes)".
    var answerTexts: [String] {
        answers.map { record in
            switch record.data {
            case let .a(address), let .aaaa(address): address
            case let .name(name): "\(Self.typeName(record.type)) \(name)"
            case let .mx(preference, exchange): "MX \(preference) \(exchange)"
            case let .other(data): "\(Self.typeName(record.type)) (\(data.count) bytes)"
            }
        }
    }

    /// A reply to `query` (the raw query bytes) with `rcode` and no records:
    /// the same id and question section (copied byte for byte), QR and RA
    /// set, opcode, RD and CD copied, AA, TC, AD clear. Records in the
    /// query's other sections (an EDNS OPT, say) are not carried over.
    ///
    /// nil if the header or a question cannot be read, if a question's name
    /// points outside the question section (at the header, or at records
    /// the reply leaves out), or if `query` is itself a response: answering
    /// responses could set two proxies bouncing a packet between them.
    static func reply(toQuery query: [UInt8], rcode: UInt8) -> [UInt8]? {
        var reader = DNSReader(query)
        guard let id = reader.u16(), let flags = reader.u16(), flags & 0x8000 == 0,
            let questionCount = reader.u16(), reader.u16() != nil, reader.u16() != nil, reader.u16() != nil
        else { return nil }
        var questions: [Question] = []
        for _ in 0..<questionCount {
            guard let name = reader.name(), let type = reader.u16(), let qclass = reader.u16() else { return nil }
            questions.append(Question(name: name, type: type, qclass: qclass))
        }
        // QR, opcode, RD and CD from the query; RA; the rcode.
        let replyFlags = 0x8000 | flags & 0x7910 | 0x0080 | UInt16(rcode & 0x0F)
        var reply: [UInt8] = []
        reply.reserveCapacity(reader.position)
        for field in [id, replyFlags, questionCount, 0, 0, 0] {
            reply.append(UInt8(truncatingIfNeeded: field >> 8))
            reply.append(UInt8(truncatingIfNeeded: field))
        }
        reply.append(contentsOf: query[12..<reader.position])
        // A pointer into the header or past the questions would read other
        // bytes in the reply: then there is no faithful verbatim copy.
        guard DNSMessage(parsing: reply)?.questions == questions else { return nil }
        return reply
    }

    /// "1.2.3.4"; nil unless 4 bytes.
    static func ipv4Text(_ bytes: some Collection<UInt8>) -> String? {
        guard bytes.count == 4 else { return nil }
        return bytes.map { String($0) }.joined(separator: ".")
    }

    /// RFC 5952 text: lowercase, no leading zeros, the longest run of two or
    /// more zero groups (the first, on a tie) as "::", and IPv4-mapped
    /// addresses as "::ffff:192.0.2.1" (section 5). nil unless 16 bytes.
    static func ipv6Text(_ bytes: some Collection<UInt8>) -> String? {
        let bytes = Array(bytes)
        guard bytes.count == 16 else { return nil }
        var groups = [UInt16](repeating: 0, count: 8)
        for i in 0..<8 { groups[i] = UInt16(bytes[2 * i]) << 8 | UInt16(bytes[2 * i + 1]) }
        if groups[0..<5].allSatisfy({ $0 == 0 }), groups[5] == 0xFFFF, let v4 = ipv4Text(bytes[12..<16]) {
            return "::ffff:" + v4
        }
        var bestStart = -1, bestLength = 0, runStart = -1
        for i in 0...8 {
            if i < 8, groups[i] == 0 {
                if runStart < 0 { runStart = i }
            } else if runStart >= 0 {
                if i - runStart > bestLength {
                    bestStart = runStart
                    bestLength = i - runStart
                }
                runStart = -1
            }
        }
        func hex(_ range: Range<Int>) -> String {
            groups[range].map { String($0, radix: 16) }.joined(separator: ":")
        }
        guard bestLength >= 2 else { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
    }
}

/// Bounds-checked reads from a whole message, front to back.
private struct DNSReader {
    let bytes: [UInt8]
    private(set) var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    private var remaining: Int { bytes.count - position }

    mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { position += 2 }
        return UInt16(bytes[position]) << 8 | UInt16(bytes[position + 1])
    }

    mutating func u32() -> UInt32? {
        guard let high = u16(), let low = u16() else { return nil }
        return UInt32(high) << 16 | UInt32(low)
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    /// Reads the name here, following compression pointers anywhere in the
    /// message, and moves past it (past the first pointer, if any).
    mutating func name() -> String? {
        guard let (text, end) = Self.name(in: bytes, at: position) else { return nil }
        position = end
        return text
    }

    mutating func record() -> DNSMessage.Record? {
        guard let name = name(), let type = u16(), u16() != nil, let ttl = u32(),
            let length = u16(), let rdata = take(Int(length))
        else { return nil }
        return DNSMessage.Record(name: name, type: type, ttl: ttl, data: data(type, rdata))
    }

    /// The rdata as its type says, or raw when it does not have that shape.
    /// Names in rdata may point anywhere in the message but must end where
    /// the rdata does.
    private func data(_ type: UInt16, _ rdata: ArraySlice<UInt8>) -> DNSMessage.RecordData {
        switch type {
        case 1:
            if let text = DNSMessage.ipv4Text(rdata) { return .a(text) }
        case 28:
            if let text = DNSMessage.ipv6Text(rdata) { return .aaaa(text) }
        case 2, 5, 12, 39:
            if let (name, end) = Self.name(in: bytes, at: rdata.startIndex), end == rdata.endIndex { return .name(name) }
        case 15:
            if rdata.count >= 3, let (name, end) = Self.name(in: bytes, at: rdata.startIndex + 2), end == rdata.endIndex {
                return .mx(preference: UInt16(rdata[rdata.startIndex]) << 8 | UInt16(rdata[rdata.startIndex + 1]), exchange: name)
            }
        default:
            break
        }
        return .other(Array(rdata))
    }

    /// The name at `start` as text, and where the bytes after it begin.
    static func name(in bytes: [UInt8], at start: Int) -> (String, Int)? {
        var position = start
        var end: Int?
        var jumps = 0
        var wireLength = 1  // the root label
        var text: [UInt8] = []
        text.reserveCapacity(64)
        while true {
            guard position >= 0, position < bytes.count else { return nil }
            let length = bytes[position]
            switch length & 0xC0 {
            case 0xC0:
                guard bytes.count - position >= 2, jumps < DNSMessage.maxPointerJumps else { return nil }
                jumps += 1
                if end == nil { end = position + 2 }
                position = Int(length & 0x3F) << 8 | Int(bytes[position + 1])
            case 0x00 where length == 0:
                let name = text.isEmpty ? "." : String(decoding: text, as: UTF8.self)
                return (name, end ?? position + 1)
            case 0x00:
                let count = Int(length)
                wireLength += 1 + count
                guard wireLength <= DNSMessage.maxNameLength, bytes.count - position - 1 >= count else { return nil }
                if !text.isEmpty { text.append(UInt8(ascii: ".")) }
                let label = bytes[(position + 1)...(position + count)]
                if label.allSatisfy(isPlain) {
                    text.append(contentsOf: label)
                } else {
                    for byte in label { escape(byte, into: &text) }
                }
                position += 1 + count
            default:
                // 0x40 (extended label, RFC 6891 obsoleted them) and 0x80 are not names we read.
                return nil
            }
        }
    }

    /// Printable ASCII other than the two characters escaped.
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x21 && byte <= 0x7E && byte != UInt8(ascii: ".") && byte != UInt8(ascii: "\\")
    }

    private static func escape(_ byte: UInt8, into text: inout [UInt8]) {
        switch byte {
        case _ where isPlain(byte):
            text.append(byte)
        case UInt8(ascii: "."), UInt8(ascii: "\\"):
            text.append(UInt8(ascii: "\\"))
            text.append(byte)
        default:
            text.append(UInt8(ascii: "\\"))
            text.append(UInt8(ascii: "0") + byte / 100)
            text.append(UInt8(ascii: "0") + byte / 10 % 10)
            text.append(UInt8(ascii: "0") + byte % 10)
        }
    }
}
