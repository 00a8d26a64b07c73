import Testing

@testable import BusymateShared

@Suite struct QRCodeTests {
    // Reference matrices from the Python `qrcode` package (segno agrees once its extra-pad-byte quirk is patched), same
    // version and mask; the same symbols decode with zbarimg. `#` = dark.
    static let helloWorldLowMask4: [String] = [
        "#######.#####.#######",
        "#.....#.#.#.#.#.....#",
        "#.###.#.#.....#.###.#",
        "#.###.#.####..#.###.#",
        "#.###.#.....#.#.###.#",
        "#.....#.##.#..#.....#",
        "#######.#.#.#.#######",
        ".........####........",
        "##..###..#.#...#.####",
        "..#.##..#####....####",
        "##..#.#..###.##.#..#.",
        "#.#.#....#...#.......",
        "#..#..#.#...#.##..##.",
        "........##..####.#.##",
        "#######..##.#.#.##.#.",
        "#.....#.#.####.##..##",
        "#.###.#.#.##.##...##.",
        "#.###.#.....#...##.##",
        "#.###.#..#.#...###...",
        "#.....#.#.##.#.......",
        "#######.#.#######.#.#",
    ]

    static let proxyURLMediumMask0: [String] = [
        "#######..#.###..##.##.#######",
        "#.....#.#.##..####.#..#.....#",
        "#.###.#...#####.#...#.#.###.#",
        "#.###.#....#####...##.#.###.#",
        "#.###.#.#.#.#.#....##.#.###.#",
        "#.....#...####.....##.#.....#",
        "#######.#.#.#.#.#.#.#.#######",
        ".........###.##.##.#.........",
        "#.#.#.#...##..######....#..#.",
        ".##.#..###.##.##......##.#..#",
        "..#.#.#.##..##...#..#####.###",
        "..#.#..####.#....##..###.#.#.",
        "#.#.#.##.#..#...##.#..##.#.##",
        ".....#.##.#..#..###...##.##.#",
        "##...######.#.#...#.#......##",
        "....#...#..#####.#.#.#..##.#.",
        ".##.#.#..###..#.##....#....##",
        ".#..##.#....#.#.###..###..#.#",
        "#...#.#.#...##..###.##...#.##",
        ".#####.#..##...#.#...###.#.#.",
        "#.#.####.##.#....#..#####....",
        "........#.####..#...#...#.###",
        "#######...##..#.##.##.#.##.##",
        "#.....#..#.####.#####...##.##",
        "#.###.#.#..#..####..######..#",
        "#.###.#..###..#...####..##.##",
        "#.###.#.##.#.##...##.#..###.#",
        "#.....#...##...#.#.###...#.#.",
        "#######.#.###.##.#..###..#.##",
    ]

    // Version 7: exercises the BCH(18,6) version-information blocks.
    static let digits150LowMask2: [String] = [
        "#######..#.#####.#.....#......#..#..#.#######",
        "#.....#.#.##..#..##..##.######..#..#..#.....#",
        "#.###.#..####....#.#.#..##..######.#..#.###.#",
        "#.###.#.#..#....#.###.#..###.....#.##.#.###.#",
        "#.###.#..#..####.#..#####..##.##..###.#.###.#",
        "#.....#.######..###.#...###..#.#......#.....#",
        "#######.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#######",
        ".........###..#..##.#...#...#..######........",
        "#####.###.......#.#######..#.##..#.#.#.#.#.#.",
        ".#..#....#.#.###.#.#.###...#..####..#..#..###",
        "##.####.#.....##...##...######.#..##.###..#..",
        ".###.#..#.####....#..#.##.#.#####..##.#.#.#.#",
        "##...##.##..#...#.###.###..#.#...###...#.#...",
        "..####.##.######.#.....#......#..#..#...#.###",
        "###.#.####.#.#.######.#.###..#.#..#.###..#...",
        "....#..###..###......#.#....#.#######...#.##.",
        ".#..###.##......#.##..####.#..#....#.#.#.#..#",
        "..#..#..#....###.#.#.#.#....#.#.##..#.....###",
        "#.#..###.##.....#..###..###..#.#..#..######..",
        "#####..####.#..#.##..#..#.#.#..##..##.#.#.##.",
        ".#########.##...#.#.######.#..#...########...",
        ".####...#.##.###.#.##...#..#..####.##...#####",
        ".#..#.#.#.##..#..##.#.#.###..#....#.#.#.#.#..",
        "#..##...#####....#..#...#...#.####..#...#.#..",
        ".#.######..##...#.#######.##.##..#.#######..#",
        ".....#..#.#.####.#.#..###..##.##.#.###.#..###",
        "####..##..###..##.#..###.##..#.#..#....##....",
        "#####.......##.#..#.##..#...#..########...#..",
        ".#..#.#..###....#.#.##.....#.##..#......##...",
        "######...##.####.#.#..###...#.#.##....##.####",
        "..###.#..#.##.##....##.#.###.#....#....#.##..",
        ".#..##.....###....#.....#...#.####.######.###",
        "###.####..#.#...#.#.##.#.###........#...##.#.",
        "#.#..#.###.#...#.#.#..#.#.....#..#.##..#..###",
        "....#.#.#.........#.####.##..#.#..#......#...",
        ".####..##.##..##.###....#...#.#########...#.#",
        "#..##.#.#..#....#.#.######.#..#.....######.#.",
        "........##..####.#.##...#..##.##.#..#...#####",
        "#######.##..###.#..##.#.####.#....#.#.#.#....",
        "#.....#....##.##.##.#...##..#.####.##...#.#.#",
        "#.###.#.#..####.#.#.#####..#.#...##.######.#.",
        "#.###.#.#.#.#..#.#...#.##..#..####.#....####.",
        "#.###.#.#.###..#..#...#####..#....#.####..#.#",
        "#.....#.#.#.####...###.#....#.####.##...#.#..",
        "#######.#..#....#.#..##.#.##.##..#..###..#.#.",
    ]

    static func rows(_ qr: QRCode) -> [String] {
        (0..<qr.size).map { y in String((0..<qr.size).map { x in qr.isDark(x: x, y: y) ? "#" : "." }) }
    }

    @Test func helloWorldIsVersion1AtLow() throws {
        let qr = try QRCode.encode("HELLO WORLD", correction: .low)
        #expect(qr.version == 1)
        #expect(qr.size == 21)
    }

    @Test func versionBoundaries() throws {
        // Byte-mode capacities from ISO/IEC 18004 Table 7.
        #expect(try QRCode.encode(String(repeating: "a", count: 17), correction: .low).version == 1)
        #expect(try QRCode.encode(String(repeating: "a", count: 18), correction: .low).version == 2)
        #expect(try QRCode.encode(String(repeating: "a", count: 14), correction: .medium).version == 1)
        #expect(try QRCode.encode(String(repeating: "a", count: 7), correction: .high).version == 1)
        #expect(try QRCode.encode(String(repeating: "a", count: 8), correction: .high).version == 2)
        #expect(try QRCode.encode("http://192.168.1.20:9092/proxy.pac").version == 3)
        let largest = try QRCode.encode(String(repeating: "a", count: 2953), correction: .low)
        #expect(largest.version == 40)
        #expect(largest.size == 177)
        #expect(try QRCode.encode(String(repeating: "a", count: 1273), correction: .high).version == 40)
    }

    @Test func matchesReferenceEncoder() throws {
        let hello = try QRCode.encode("HELLO WORLD", correction: .low)
        #expect(hello.mask == 4)
        #expect(Self.rows(hello) == Self.helloWorldLowMask4)

        let url = try QRCode.encode("http://192.168.1.20:9092/proxy.pac", correction: .medium)
        #expect(url.mask == 0)
        #expect(Self.rows(url) == Self.proxyURLMediumMask0)

        let digits = try QRCode.encode(String(repeating: "0123456789", count: 15), correction: .low)
        #expect(digits.version == 7)
        #expect(digits.mask == 2)
        #expect(Self.rows(digits) == Self.digits150LowMask2)
    }

    @Test(arguments: [0, 20, 100, 400, 1200])
    func finderTimingAndDarkModule(length: Int) throws {
        let qr = try QRCode.encode(String(repeating: "q", count: length), correction: .quartile)
        #expect(qr.size == 4 * qr.version + 17)
        let n = qr.size
        for (cx, cy) in [(3, 3), (n - 4, 3), (3, n - 4)] {
            for dy in -4...4 {
                for dx in -4...4 {
                    let x = cx + dx, y = cy + dy
                    guard x >= 0, y >= 0, x < n, y < n else { continue }
                    let ring = max(abs(dx), abs(dy))
                    #expect(qr.isDark(x: x, y: y) == (ring != 2 && ring != 4), "finder at \(x),\(y)")
                }
            }
        }
        for i in 8..<(n - 8) {
            #expect(qr.isDark(x: i, y: 6) == (i % 2 == 0))
            #expect(qr.isDark(x: 6, y: i) == (i % 2 == 0))
        }
        #expect(qr.isDark(x: 8, y: n - 8))
    }

    @Test(arguments: [QRCode.Correction.low, .medium, .quartile, .high])
    func formatInformationEncodesLevelAndMask(correction: QRCode.Correction) throws {
        let levelBits: Int =
            switch correction {
            case .low: 1
            case .medium: 0
            case .quartile: 3
            case .high: 2
            }
        for mask in 0...7 {
            let qr = try QRCode.encode("format check", correction: correction, mask: mask)
            #expect(qr.mask == mask)
            // First copy: read in bit order 0...14 along row/column 8 around the top-left finder.
            let coordinates = [
                (8, 0), (8, 1), (8, 2), (8, 3), (8, 4), (8, 5), (8, 7), (8, 8), (7, 8),
                (5, 8), (4, 8), (3, 8), (2, 8), (1, 8), (0, 8),
            ]
            var first = 0
            for (i, (x, y)) in coordinates.enumerated() where qr.isDark(x: x, y: y) { first |= 1 << i }
            var second = 0
            for i in 0..<8 where qr.isDark(x: qr.size - 1 - i, y: 8) { second |= 1 << i }
            for i in 8..<15 where qr.isDark(x: 8, y: qr.size - 15 + i) { second |= 1 << i }
            #expect(first == second)
            let unmasked = first ^ 0x5412
            #expect(unmasked >> 10 == levelBits << 3 | mask)
            // A valid BCH(15,5) codeword is a multiple of the generator x^10+x^8+x^5+x^4+x^2+x+1 over GF(2).
            var residue = unmasked
            for shift in stride(from: 4, through: 0, by: -1) where residue & (1 << (shift + 10)) != 0 {
                residue ^= 0x537 << shift
            }
            #expect(residue == 0)
        }
    }

    @Test func tooLongThrows() {
        #expect(throws: QRCode.TooLong.self) {
            try QRCode.encode(String(repeating: "a", count: 2954), correction: .low)
        }
        #expect(throws: QRCode.TooLong.self) {
            try QRCode.encode(String(repeating: "a", count: 1274), correction: .high)
        }
        #expect(throws: QRCode.TooLong.self) {
            try QRCode.encode(String(repeating: "é", count: 1_000_000))
        }
    }

    @Test func outOfRangeIsLight() throws {
        let qr = try QRCode.encode("x")
        #expect(qr.isDark(x: -1, y: 0) == false)
        #expect(qr.isDark(x: 0, y: qr.size) == false)
        #expect(qr.isDark(x: Int.max, y: Int.min) == false)
    }

    @Test func deterministicAndUTF8() throws {
        let a = try QRCode.encode("Grüße 🎉", correction: .high)
        let b = try QRCode.encode("Grüße 🎉", correction: .high)
        #expect(a == b)
        let c = try QRCode.encode("Grusse", correction: .high)
        #expect(a != c)
    }

    @Test func svgIsWellFormedAndLabelled() throws {
        let qr = try QRCode.encode("http://192.168.1.20:9092/proxy.pac")
        let svg = qr.svg(label: "Proxy \"PAC\" <&> URL")
        let full = qr.size + 8
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(full) \(full)\""))
        #expect(svg.hasSuffix("</svg>"))
        #expect(svg.contains("role=\"img\""))
        #expect(svg.contains("aria-label=\"Proxy &quot;PAC&quot; &lt;&amp;&gt; URL\""))
        #expect(svg.contains("shape-rendering=\"crispEdges\""))
        #expect(svg.occurrences("<rect") == 1)
        #expect(svg.occurrences("<path") == 1)
        #expect(svg.occurrences("<") == 4)
        #expect(svg.occurrences(">") == 4)

        // The path must paint exactly the dark modules, offset by the quiet zone.
        var painted = Set<Int>()
        for piece in Self.pathData(svg).split(separator: "M").filter({ $0.isEmpty == false }) {
            // Each subpath is "x yhNv1h-Nz".
            let parts = piece.split(whereSeparator: { "hvz ".contains($0) }).compactMap { Int($0) }
            guard parts.count == 5, parts[3] == 1, parts[4] == -parts[2] else {
                Issue.record("malformed subpath \(piece)")
                continue
            }
            let x = parts[0], y = parts[1], run = parts[2]
            for dx in 0..<run { painted.insert((y - 4) * qr.size + (x - 4 + dx)) }
        }
        var expected = Set<Int>()
        for y in 0..<qr.size {
            for x in 0..<qr.size where qr.isDark(x: x, y: y) { expected.insert(y * qr.size + x) }
        }
        #expect(painted == expected)

        #expect(qr.svg(quietZone: 0, label: "x").contains("viewBox=\"0 0 \(qr.size) \(qr.size)\""))
        #expect(qr.svg(quietZone: -3, label: "x").contains("viewBox=\"0 0 \(qr.size) \(qr.size)\""))
    }

    static func pathData(_ svg: String) -> Substring {
        guard let start = svg.firstRange(of: " d=\""), let end = svg[start.upperBound...].firstIndex(of: "\"") else { return "" }
        return svg[start.upperBound..<end]
    }
}

private extension String {
    func occurrences(_ needle: String) -> Int {
        ranges(of: needle).count
    }
}
