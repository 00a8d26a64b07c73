// QR Code encoder (ISO/IEC 18004): byte mode, versions 1–40, all four error-correction levels.

public struct QRCode: Sendable, Equatable {
    public enum Correction: Sendable {
        case low, medium, quartile, high
    }

    public struct TooLong: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public let size: Int
    public let version: Int
    /// Mask pattern (0...7) that was applied; exposed to tests for comparison with reference encoders.
    let mask: Int
    /// Row-major, `true` = dark.
    private let modules: [Bool]

    /// Byte mode (UTF-8), smallest version 1...40 that fits at `correction`, best of the 8 masks by the standard penalty rules.
    public static func encode(_ text: String, correction: Correction = .medium) throws(TooLong) -> QRCode {
        try encode(text, correction: correction, mask: nil)
    }

    /// `mask` forces a mask pattern (0...7) so output can be compared module-for-module with other encoders.
    static func encode(_ text: String, correction: Correction, mask forcedMask: Int?) throws(TooLong) -> QRCode {
        let bytes = Array(text.utf8)
        guard let version = QRTables.smallestVersion(byteCount: bytes.count, correction: correction) else {
            throw TooLong(description: "QR code: \(bytes.count) bytes do not fit in version 40 at \(correction) error correction")
        }
        let data = Self.dataCodewords(bytes, version: version, correction: correction)
        let codewords = Self.interleavedWithECC(data, version: version, correction: correction)

        var base = QRMatrix(version: version)
        base.drawFunctionPatterns()
        base.placeData(codewords)

        var best = base
        var bestMask = 0
        if let forced = forcedMask, (0...7).contains(forced) {
            best.applyMask(forced)
            best.drawFormatBits(correction: correction, mask: forced)
            bestMask = forced
        } else {
            var bestScore = Int.max
            for candidate in 0...7 {
                var m = base
                m.applyMask(candidate)
                m.drawFormatBits(correction: correction, mask: candidate)
                let score = m.penalty()
                if score < bestScore {
                    bestScore = score
                    best = m
                    bestMask = candidate
                }
            }
        }
        return QRCode(size: best.size, version: version, mask: bestMask, modules: best.dark)
    }

    private init(size: Int, version: Int, mask: Int, modules: [Bool]) {
        self.size = size
        self.version = version
        self.mask = mask
        self.modules = modules
    }

    /// Out-of-range coordinates are light (the quiet zone), so callers never trap.
    public func isDark(x: Int, y: Int) -> Bool {
        guard x >= 0, y >= 0, x < size, y < size else { return false }
        return modules[y * size + x]
    }

    /// A standalone <svg> element (viewBox in modules, one <path> of dark squares, white background rect, quiet zone),
    /// crispEdges, with role="img" and aria-label given.
    public func svg(quietZone: Int = 4, label: String) -> String {
        let qz = max(0, min(quietZone, 1000))
        let full = size + 2 * qz
        var path = ""
        // One subpath per horizontal run keeps the markup small.
        for y in 0..<size {
            var x = 0
            while x < size {
                guard isDark(x: x, y: y) else {
                    x += 1
                    continue
                }
                var end = x
                while end < size, isDark(x: end, y: y) { end += 1 }
                let run = end - x
                path += "M\(x + qz) \(y + qz)h\(run)v1h-\(run)z"
                x = end
            }
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(full) \(full)\" "
            + "shape-rendering=\"crispEdges\" role=\"img\" aria-label=\"\(Self.xmlEscaped(label))\">"
            + "<rect width=\"\(full)\" height=\"\(full)\" fill=\"#fff\"/>"
            + "<path fill=\"#000\" d=\"\(path)\"/>"
            + "</svg>"
    }

    /// For a terminal, two modules a character, as `qrencode -t UTF8`
    /// prints it: light modules are blocks (a terminal's text is light on
    /// dark), so the quiet zone is a frame of blocks.
    public func terminal(quietZone: Int = 2) -> String {
        let qz = max(0, min(quietZone, 10))
        var lines: [String] = []
        var y = -qz
        while y < size + qz {
            var line = ""
            for x in -qz..<(size + qz) {
                let top = !isDark(x: x, y: y), bottom = y + 1 < size + qz && !isDark(x: x, y: y + 1)
                line += top && bottom ? "\u{2588}" : top ? "\u{2580}" : bottom ? "\u{2584}" : " "
            }
            lines.append(line)
            y += 2
        }
        return lines.joined(separator: "\n")
    }

    /// Text for XML or HTML (attributes and content); control characters XML forbids are dropped.
    public static func xmlEscaped(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            // Control characters other than tab/newline are not allowed in XML 1.0.
            case "\t", "\n", "\r": out.unicodeScalars.append(ch)
            default:
                if ch.value >= 0x20 { out.unicodeScalars.append(ch) }
            }
        }
        return out
    }

    // MARK: - Data encoding

    /// Mode indicator, count, payload, terminator and pad codewords, filling the version's data capacity exactly.
    private static func dataCodewords(_ bytes: [UInt8], version: Int, correction: Correction) -> [UInt8] {
        let capacityBits = QRTables.dataCodewordCount(version: version, correction: correction) * 8
        var bits = QRBits()
        bits.append(0b0100, count: 4)
        bits.append(bytes.count, count: QRTables.countBits(version: version))
        for b in bytes { bits.append(Int(b), count: 8) }
        bits.append(0, count: min(4, capacityBits - bits.count))
        bits.append(0, count: (8 - bits.count % 8) % 8)
        var result = bits.bytes
        var pad: UInt8 = 0xEC
        while result.count * 8 < capacityBits {
            result.append(pad)
            pad = pad == 0xEC ? 0x11 : 0xEC
        }
        return result
    }

    /// Splits data into blocks, appends Reed–Solomon ECC to each, and interleaves them as the standard requires.
    private static func interleavedWithECC(_ data: [UInt8], version: Int, correction: Correction) -> [UInt8] {
        let blockCount = QRTables.blockCount(version: version, correction: correction)
        let eccLength = QRTables.eccPerBlock(version: version, correction: correction)
        let rawCodewords = QRTables.rawDataModules(version: version) / 8
        // Later blocks get one extra data codeword when the total does not divide evenly.
        let shortBlocks = blockCount - rawCodewords % blockCount
        let shortDataLength = rawCodewords / blockCount - eccLength
        let generator = QRReedSolomon.generator(degree: eccLength)

        var blocks: [[UInt8]] = []
        var eccBlocks: [[UInt8]] = []
        var offset = 0
        for i in 0..<blockCount {
            let length = shortDataLength + (i < shortBlocks ? 0 : 1)
            let end = min(offset + length, data.count)
            let block = Array(data[min(offset, end)..<end])
            offset += length
            blocks.append(block)
            eccBlocks.append(QRReedSolomon.remainder(block, generator: generator))
        }

        var result: [UInt8] = []
        result.reserveCapacity(rawCodewords)
        for i in 0...shortDataLength {
            for block in blocks where i < block.count { result.append(block[i]) }
        }
        for i in 0..<eccLength {
            for ecc in eccBlocks where i < ecc.count { result.append(ecc[i]) }
        }
        return result
    }
}
