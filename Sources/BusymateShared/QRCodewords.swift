/// The QR code's codewords: the bit stream, Reed–Solomon error correction
/// over GF(256), and the ISO/IEC 18004 capacity tables.
struct QRBits {
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

enum QRReedSolomon {
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

enum QRTables {
    static let eccCodewordsPerBlock: [[Int]] = [
        [
            0, 7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30,
            30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
            28, 28, 28, 28, 28, 28, 28, 28, 28,
        ],
        [
            0, 13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30,
            30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            0, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30,
            30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
    ]

    static let errorCorrectionBlocks: [[Int]] = [
        [
            0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21,
            22, 24, 25,
        ],
        [
            0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38,
            40, 43, 45, 47, 49,
        ],
        [
            0, 1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51,
            53, 56, 59, 62, 65, 68,
        ],
        [
            0, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60,
            63, 66, 70, 74, 77, 81,
        ],
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
                needed <= dataCodewordCount(version: version, correction: correction) * 8
            {
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
