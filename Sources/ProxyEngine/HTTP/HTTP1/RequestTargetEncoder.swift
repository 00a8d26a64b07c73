import NIOCore

/// Percent-encodes the bytes outside ASCII in a request line's target, the
/// one thing NIO's decoder refuses that clients send (a typed `café` with
/// `curl --path-as-is`, old scripts) and origins and mitmproxy take. Only a
/// whole request line at the start of the bytes is touched, and only when it
/// reads as one (`METHOD SP target SP HTTP/1.x`, the method in capitals):
/// never a header, never a body.
enum RequestTargetEncoder {
    /// The bytes with the first line's target encoded, and that target as it
    /// now reads; nil when nothing needs encoding.
    static func encode(_ buffer: ByteBuffer) -> (buffer: ByteBuffer, target: String)? {
        let view = buffer.readableBytesView
        var i = view.startIndex
        // RFC 9112 lets a server skip empty lines before a request line.
        while i < view.endIndex, view[i] == 0x0D || view[i] == 0x0A { i += 1 }
        let methodStart = i
        while i < view.endIndex, (0x41...0x5A).contains(view[i]) { i += 1 }
        guard i > methodStart, i < view.endIndex, view[i] == 0x20 else { return nil }
        let targetStart = i + 1
        guard let lineEnd = view[targetStart...].firstIndex(of: 0x0A) else { return nil }
        var targetEnd = lineEnd
        if targetEnd > targetStart, view[targetEnd - 1] == 0x0D { targetEnd -= 1 }
        // The version: " HTTP/1.0" or " HTTP/1.1" ends the line.
        let version = Array(" HTTP/1.".utf8)
        guard targetEnd - targetStart > version.count + 1 else { return nil }
        let versionStart = targetEnd - version.count - 1
        guard view[versionStart..<(targetEnd - 1)].elementsEqual(version), view[targetEnd - 1] == 0x30 || view[targetEnd - 1] == 0x31 else {
            return nil
        }
        let target = view[targetStart..<versionStart]
        guard !target.isEmpty, target.contains(where: { $0 >= 0x80 }), !target.contains(0x20) else { return nil }

        var encoded: [UInt8] = []
        encoded.reserveCapacity(target.count * 3)
        for byte in target {
            if byte >= 0x80 {
                encoded.append(0x25)
                encoded.append(hex[Int(byte >> 4)])
                encoded.append(hex[Int(byte & 0x0F)])
            } else {
                encoded.append(byte)
            }
        }
        var out = ByteBuffer()
        out.reserveCapacity(buffer.readableBytes + encoded.count - target.count)
        out.writeBytes(view[view.startIndex..<targetStart])
        out.writeBytes(encoded)
        out.writeBytes(view[versionStart..<view.endIndex])
        return (out, String(decoding: encoded, as: UTF8.self))
    }

    /// Whether the bytes are the start of a request line still to end (no
    /// LF yet), shaped as one so far: then they are held until it ends, so
    /// a raw byte in a line split across reads is encoded too. Anything
    /// else goes to the decoder as it comes.
    static func awaitsRestOfLine(_ buffer: ByteBuffer) -> Bool {
        let view = buffer.readableBytesView
        guard !view.isEmpty, !view.contains(0x0A) else { return false }
        var i = view.startIndex
        while i < view.endIndex, view[i] == 0x0D { i += 1 }
        let methodStart = i
        while i < view.endIndex, (0x41...0x5A).contains(view[i]) { i += 1 }
        guard i < view.endIndex else { return i > methodStart || methodStart > view.startIndex }
        guard i > methodStart, view[i] == 0x20 else { return false }
        i += 1
        // The target: anything but a space or a control byte.
        while i < view.endIndex, view[i] > 0x20, view[i] != 0x7F { i += 1 }
        guard i < view.endIndex else { return true }
        guard view[i] == 0x20 else { return false }
        // The version so far, and the CR that ends the line.
        let rest = view[(i + 1)...]
        let version = Array("HTTP/1.".utf8)
        let known = rest.prefix(version.count)
        guard known.elementsEqual(version.prefix(known.count)) else { return false }
        let after = rest.dropFirst(version.count)
        guard let digit = after.first else { return true }
        guard digit == 0x30 || digit == 0x31 else { return false }
        let end = after.dropFirst()
        return end.isEmpty || (end.count == 1 && end.first == 0x0D)
    }

    private static let hex = Array("0123456789ABCDEF".utf8)
}
