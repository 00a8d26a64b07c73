/// The QR code's module grid: function patterns, data placement, masks
/// and their penalty (ISO/IEC 18004 §7).
struct QRMatrix {
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

        let positions = QRTables.alignmentPositions(version: version)
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
        let data = QRTables.formatBits(correction) << 3 | mask
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
