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
        guard let version = Tables.smallestVersion(byteCount: bytes.count, correction: correction) else {
            throw TooLong(description: "QR code: \(bytes.count) bytes do not fit in version 40 at \(correction) error correction")
        }
        let data = Self.dataCodewords(bytes, version: version, correction: correction)
        let codewords = Self.interleavedWithECC(data, version: version, correction: correction)

        var base = Matrix(version: version)
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
                guard isDark(x: x, y: y) else { x += 1; continue }
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

    /// Text for XML or HTML (attributes and content); control characters XML forbids are dropped.
    static func xmlEscaped(_ s: String) -> String {
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
        let capacityBits = Tables.dataCodewordCount(version: version, correction: correction) * 8
        var bits = BitBuffer()
        bits.append(0b0100, count: 4)
        bits.append(bytes.count, count: Tables.countBits(version: version))
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
        let blockCount = Tables.blockCount(version: version, correction: correction)
        let eccLength = Tables.eccPerBlock(version: version, correction: correction)
        let rawCodewords = Tables.rawDataModules(version: version) / 8
        // Later blocks get one extra data codeword when the total does not divide evenly.
        let shortBlocks = blockCount - rawCodewords % blockCount
        let shortDataLength = rawCodewords / blockCount - eccLength
        let generator = ReedSolomon.generator(degree: eccLength)

        var blocks: [[UInt8]] = []
        var eccBlocks: [[UInt8]] = []
        var offset = 0
        for i in 0..<blockCount {
            let length = shortDataLength + (i < shortBlocks ? 0 : 1)
            let end = min(offset + length, data.count)
            let block = Array(data[min(offset, end)..<end])
            offset += length
            blocks.append(block)
            eccBlocks.append(ReedSolomon.remainder(block, generator: generator))
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

// MARK: - Bits

private struct BitBuffer {
    private(set) var bytes: [UInt8] = []
    private(set) var count = 0

    mutating func append(_ value: Int, count n: Int) {
        guard n > 0 else { return }
        for shift in stride(from: n - 1, through: 0, by: -1) {
            if count % 8 == 0 { bytes.append(0) }
            if (value >> shift) & 1 == 1 {
                bytes[bytes.count - 1] |= UInt8(0x80 >> (count % 8))
            }
            count += 1
        }
    }
}

// MARK: - Reed–Solomon over GF(256), primitive polynomial x^8 + x^4 + x^3 + x^2 + 1

private enum ReedSolomon {
    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        // Russian-peasant multiplication; avoids lookup tables that would need global mutable state.
        var x = Int(a), y = Int(b), product = 0
        while y != 0 {
            if y & 1 == 1 { product ^= x }
            x <<= 1
            if x & 0x100 != 0 { x ^= 0x11D }
            y >>= 1
        }
        return UInt8(truncatingIfNeeded: product)
    }

    /// Coefficients of ∏(x − αⁱ) for i in 0..<degree, highest power first, leading 1 omitted.
    static func generator(degree: Int) -> [UInt8] {
        guard degree > 0 else { return [] }
        var coefficients = [UInt8](repeating: 0, count: degree)
        coefficients[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            for j in 0..<degree {
                coefficients[j] = multiply(coefficients[j], root)
                if j + 1 < degree { coefficients[j] ^= coefficients[j + 1] }
            }
            root = multiply(root, 2)
        }
        return coefficients
    }

    /// data(x)·x^degree mod generator(x): the ECC codewords.
    static func remainder(_ data: [UInt8], generator: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: generator.count)
        guard !result.isEmpty else { return result }
        for byte in data {
            let factor = byte ^ result[0]
            result.removeFirst()
            result.append(0)
            for i in result.indices {
                result[i] ^= multiply(generator[i], factor)
            }
        }
        return result
    }
}

// MARK: - Capacity tables (ISO/IEC 18004 Table 9), index 0 unused, columns L, M, Q, H

private enum Tables {
    static let eccCodewordsPerBlock: [[Int]] = [
        [0, 7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28],
        [0, 13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [0, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
    ]

    static let errorCorrectionBlocks: [[Int]] = [
        [0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25],
        [0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49],
        [0, 1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68],
        [0, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81],
    ]

    static func row(_ c: QRCode.Correction) -> Int {
        switch c {
        case .low: 0
        case .medium: 1
        case .quartile: 2
        case .high: 3
        }
    }

    /// The two-bit level code stored in format information (not in L, M, Q, H order).
    static func formatBits(_ c: QRCode.Correction) -> Int {
        switch c {
        case .low: 1
        case .medium: 0
        case .quartile: 3
        case .high: 2
        }
    }

    static func eccPerBlock(version: Int, correction: QRCode.Correction) -> Int {
        eccCodewordsPerBlock[row(correction)][version]
    }

    static func blockCount(version: Int, correction: QRCode.Correction) -> Int {
        errorCorrectionBlocks[row(correction)][version]
    }

    static func alignmentCount(version: Int) -> Int {
        version == 1 ? 0 : version / 7 + 2
    }

    /// Modules left for codewords (and remainder bits) once every function pattern is drawn.
    static func rawDataModules(version: Int) -> Int {
        let size = 4 * version + 17
        var modules = size * size - 3 * 64 - 31 - 2 * (size - 16)
        let n = alignmentCount(version: version)
        if n > 0 {
            // n² − 3 patterns (corners hold finders); 2(n − 2) of them sit on a timing line, sharing 5 modules.
            modules -= 25 * (n * n - 3) - 10 * (n - 2)
        }
        if version >= 7 { modules -= 36 }
        return modules
    }

    static func dataCodewordCount(version: Int, correction: QRCode.Correction) -> Int {
        rawDataModules(version: version) / 8
            - eccPerBlock(version: version, correction: correction) * blockCount(version: version, correction: correction)
    }

    static func countBits(version: Int) -> Int {
        version < 10 ? 8 : 16
    }

    static func smallestVersion(byteCount: Int, correction: QRCode.Correction) -> Int? {
        // Checked before multiplying so enormous inputs cannot overflow.
        guard byteCount <= 4096 else { return nil }
        for version in 1...40 {
            let needed = 4 + countBits(version: version) + 8 * byteCount
            if byteCount < (1 << countBits(version: version)),
               needed <= dataCodewordCount(version: version, correction: correction) * 8 {
                return version
            }
        }
        return nil
    }

    /// Centre coordinates of alignment patterns: first at 6, last at size − 7, evenly spaced by an even step in between.
    static func alignmentPositions(version: Int) -> [Int] {
        let n = alignmentCount(version: version)
        guard n > 0 else { return [] }
        let size = 4 * version + 17
        let step = (version * 8 + n * 3 + 5) / (n * 4 - 4) * 2
        var positions = [6]
        for i in stride(from: n - 2, through: 0, by: -1) {
            positions.append(size - 7 - i * step)
        }
        return positions
    }
}

// MARK: - Module matrix

private struct Matrix {
    let version: Int
    let size: Int
    var dark: [Bool]
    var isFunction: [Bool]

    init(version: Int) {
        self.version = version
        self.size = 4 * version + 17
        self.dark = Array(repeating: false, count: size * size)
        self.isFunction = Array(repeating: false, count: size * size)
    }

    func get(_ x: Int, _ y: Int) -> Bool {
        dark[y * size + x]
    }

    mutating func setFunction(_ x: Int, _ y: Int, _ value: Bool) {
        guard x >= 0, y >= 0, x < size, y < size else { return }
        dark[y * size + x] = value
        isFunction[y * size + x] = true
    }

    mutating func drawFunctionPatterns() {
        for i in 0..<size {
            setFunction(6, i, i % 2 == 0)
            setFunction(i, 6, i % 2 == 0)
        }
        drawFinder(3, 3)
        drawFinder(size - 4, 3)
        drawFinder(3, size - 4)

        let positions = Tables.alignmentPositions(version: version)
        let last = positions.count - 1
        for (i, cy) in positions.enumerated() {
            for (j, cx) in positions.enumerated() {
                let overlapsFinder = (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0)
                if !overlapsFinder { drawAlignment(cx, cy) }
            }
        }

        // Reserve format areas now (mask 0 placeholder) so data placement skips them; real bits are drawn per mask.
        drawFormatBits(correction: .medium, mask: 0)
        drawVersion()
    }

    /// 7×7 finder plus its light separator ring, clipped at the symbol edge.
    private mutating func drawFinder(_ cx: Int, _ cy: Int) {
        for dy in -4...4 {
            for dx in -4...4 {
                let distance = max(abs(dx), abs(dy))
                setFunction(cx + dx, cy + dy, distance != 2 && distance != 4)
            }
        }
    }

    private mutating func drawAlignment(_ cx: Int, _ cy: Int) {
        for dy in -2...2 {
            for dx in -2...2 {
                setFunction(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1)
            }
        }
    }

    /// BCH(15,5) format information, both copies, plus the dark module.
    mutating func drawFormatBits(correction: QRCode.Correction, mask: Int) {
        let data = Tables.formatBits(correction) << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        let bits = (data << 10 | remainder) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }

        // Copy around the top-left finder.
        for i in 0...5 { setFunction(8, i, bit(i)) }
        setFunction(8, 7, bit(6))
        setFunction(8, 8, bit(7))
        setFunction(7, 8, bit(8))
        for i in 9..<15 { setFunction(14 - i, 8, bit(i)) }

        // Copy split between the top-right and bottom-left finders.
        for i in 0..<8 { setFunction(size - 1 - i, 8, bit(i)) }
        for i in 8..<15 { setFunction(8, size - 15 + i, bit(i)) }
        setFunction(8, size - 8, true)
    }

    /// BCH(18,6) version information in the two 6×3 blocks, versions 7 and up.
    private mutating func drawVersion() {
        guard version >= 7 else { return }
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        let bits = version << 12 | remainder
        for i in 0..<18 {
            let value = (bits >> i) & 1 == 1
            let a = size - 11 + i % 3
            let b = i / 3
            setFunction(a, b, value)
            setFunction(b, a, value)
        }
    }

    /// Two-column zigzag from the bottom-right, skipping the vertical timing column; leftover modules stay light.
    mutating func placeData(_ codewords: [UInt8]) {
        let totalBits = codewords.count * 8
        var bitIndex = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for step in 0..<size {
                let y = upward ? size - 1 - step : step
                for j in 0..<2 {
                    let x = right - j
                    let index = y * size + x
                    if isFunction[index] || bitIndex >= totalBits { continue }
                    let byte = codewords[bitIndex >> 3]
                    dark[index] = (byte >> (7 - UInt8(bitIndex & 7))) & 1 == 1
                    bitIndex += 1
                }
            }
            right -= 2
        }
    }

    mutating func applyMask(_ mask: Int) {
        for y in 0..<size {
            for x in 0..<size where !isFunction[y * size + x] {
                let flip: Bool
                switch mask {
                case 0: flip = (x + y) % 2 == 0
                case 1: flip = y % 2 == 0
                case 2: flip = x % 3 == 0
                case 3: flip = (x + y) % 3 == 0
                case 4: flip = (x / 3 + y / 2) % 2 == 0
                case 5: flip = x * y % 2 + x * y % 3 == 0
                case 6: flip = (x * y % 2 + x * y % 3) % 2 == 0
                default: flip = ((x + y) % 2 + x * y % 3) % 2 == 0
                }
                if flip { dark[y * size + x].toggle() }
            }
        }
    }

    // MARK: Penalty (ISO/IEC 18004 §7.8.3)

    func penalty() -> Int {
        var score = 0
        for i in 0..<size {
            let row = (0..<size).map { get($0, i) }
            let column = (0..<size).map { get(i, $0) }
            score += Self.runPenalty(row) + Self.finderLikePenalty(row)
            score += Self.runPenalty(column) + Self.finderLikePenalty(column)
        }
        // Rule 2: every 2×2 block of one colour (overlapping blocks each count).
        for y in 0..<(size - 1) {
            for x in 0..<(size - 1) {
                let c = get(x, y)
                if c == get(x + 1, y), c == get(x, y + 1), c == get(x + 1, y + 1) { score += 3 }
            }
        }
        // Rule 4: 10 points per full 5% step away from half dark.
        let darkCount = dark.reduce(0) { $0 + ($1 ? 1 : 0) }
        let total = size * size
        score += 10 * (abs(darkCount * 20 - total * 10) / total)
        return score
    }

    /// Rule 1: a run of 5 + i same-coloured modules costs 3 + i.
    private static func runPenalty(_ line: [Bool]) -> Int {
        var score = 0
        var runLength = 0
        var previous: Bool?
        for module in line {
            if module == previous {
                runLength += 1
            } else {
                if runLength >= 5 { score += runLength - 2 }
                runLength = 1
                previous = module
            }
        }
        if runLength >= 5 { score += runLength - 2 }
        return score
    }

    /// Rule 3: dark-light-dark×3-light-dark with four light modules on either side (beyond the edge counts as light).
    private static func finderLikePenalty(_ line: [Bool]) -> Int {
        let pattern = [true, false, true, true, true, false, true]
        let n = line.count
        func lightRun(_ from: Int) -> Bool {
            for i in from..<(from + 4) where i >= 0 && i < n && line[i] { return false }
            return true
        }
        var score = 0
        var start = 0
        while start + 7 <= n {
            var matches = true
            for k in 0..<7 where line[start + k] != pattern[k] {
                matches = false
                break
            }
            if matches, lightRun(start - 4) || lightRun(start + 7) {
                score += 40
            }
            start += 1
        }
        return score
    }
}
