import BusymateShared
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Clients that break the rules on purpose: each gets a clear answer (or a
/// closed connection) and costs the proxy nothing it cannot give back.
@Suite(.serialized) struct HostileClientTests {
    struct RawReply: Decodable {
        var status: Int?
        var text: String
        var closed: Bool
        var timed_out: Bool
    }

    static let scripts = Command.repoRoot.appendingPathComponent("tests/hostile")

    /// Sends `request` as raw bytes (CRLFs and all) and reads one reply.
    /// `splits`: byte offsets where the request is cut into segments sent 100 ms apart.
    static func raw(_ port: Int, _ request: String, timeout: Double = 5, splits: [Int] = []) throws -> RawReply {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bm-raw-\(UInt32.random(in: 0...UInt32.max))")
        try Data(request.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try Command.run(
            "/usr/bin/python3",
            [
                scripts.appendingPathComponent("raw.py").path, "\(port)", "@" + file.path, "\(timeout)",
                splits.map(String.init).joined(separator: ","),
            ], timeout: timeout + 10)
        return try JSONDecoder().decode(RawReply.self, from: Data(r.stdout.utf8))
    }

    @Test func hostComesFromTheURLAndViaNamesTheProxy() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        // RFC 9112 §3.2.2: the URL's authority, not the client's Host.
        let echoed = try Self.raw(
            port, "GET http://127.0.0.1:\(origin.port)/echo-headers HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        #expect(echoed.status == 200)
        #expect(echoed.text.contains("Host: 127.0.0.1:\(origin.port)\n") && !echoed.text.contains("evil.example"), "\(echoed.text)")
        let via = try #require(echoed.text.split(separator: "\n").first { $0.hasPrefix("Via: ") }.map { String($0.dropFirst(5)) })
        #expect(via.hasPrefix("1.1 busymate-"), "\(via)")
        // A request that has been through this proxy already: a loop.
        let looped = try Self.raw(port, "GET http://127.0.0.1:\(origin.port)/again HTTP/1.1\r\nHost: x\r\nVia: 1.0 other, \(via)\r\n\r\n")
        #expect(looped.status == 508)
        #expect(looped.text.contains("already passed this proxy"))
        // Another proxy's Via is fine.
        #expect(
            try Self.raw(port, "GET http://127.0.0.1:\(origin.port)/x HTTP/1.1\r\nHost: x\r\nVia: 1.1 squid\r\nConnection: close\r\n\r\n")
                .status == 200)
        let rows = try appliance.rows(
            "the loop is recorded", until: { $0.contains { ($0["error"] as? String)?.contains("forwarding loop") == true } })
        #expect(rows.count == 3)
    }

    @Test func aProxyPointedAtItselfIsRefused() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let connect = try Self.raw(port, "CONNECT 127.0.0.1:\(port) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        #expect(connect.status == 502)
        #expect(connect.text.contains("own listening address"), "\(connect.text)")
        let plain = try Self.raw(port, "GET http://localhost:\(port)/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(plain.status == 502)
        #expect(plain.text.contains("own listening address"), "\(plain.text)")
        #expect(try appliance.status().int("counters.connections_active") ?? 99 <= 1)
    }

    @Test func smugglingShapesAreAnswered400AndRecorded() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let url = "http://127.0.0.1:\(origin.port)/x"
        let shapes: [(String, String)] = [
            ("CL and TE", "POST \(url) HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("two CLs", "POST \(url) HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"),
            ("TE not chunked", "POST \(url) HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"),
            ("TE chunked, identity", "POST \(url) HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"),
            ("TE twice", "POST \(url) HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n"),
            ("space before colon", "POST \(url) HTTP/1.1\r\nHost: a\r\nContent-Length : 4\r\n\r\nabcd"),
            ("obs-fold", "POST \(url) HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"),
            ("negative CL", "POST \(url) HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
            ("bad chunk size", "POST \(url) HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n"),
            ("bare CR in a value", "GET \(url) HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"),
            ("NUL in a value", "GET \(url) HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n"),
            ("two Hosts", "GET \(url) HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            ("HTTP/1.0 chunked", "POST \(url) HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ]
        for (name, request) in shapes {
            let reply = try Self.raw(port, request)
            #expect(reply.status == 400, "\(name): \(reply.text)")
            #expect(reply.text.contains("Busymate: "), "\(name)")
            #expect(!reply.text.contains("origin "), "\(name) reached the origin")
        }
        let rows = try appliance.rows("every refusal is recorded", until: { $0.count == shapes.count })
        #expect(
            rows.allSatisfy { $0["status"] as? Int == 400 && ($0["error"] as? String)?.isEmpty == false },
            "\(rows.map { ($0["status"] ?? "nil", $0["error"] ?? "nil") })")
        // The method and URL of a refused request stay in its row.
        #expect(rows.filter { $0["method"] as? String == "POST" && $0["url"] as? String == url }.count >= 9)
    }

    @Test func headerBlocksOver64KiBAreAnswered431() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let url = "http://127.0.0.1:\(origin.port)/x"
        let fits = try Self.raw(
            port, "GET \(url) HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "a", count: 60 << 10))\r\nConnection: close\r\n\r\n")
        #expect(fits.status == 200)
        for size in [64 << 10, 1 << 20] {
            let reply = try Self.raw(port, "GET \(url) HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "a", count: size))\r\n\r\n")
            #expect(reply.status == 431, "\(size): \(reply.text.prefix(200))")
            #expect(reply.text.contains("over the limit (64 KiB)"))
        }
        // Many small headers add up the same way.
        let many = (0..<2000).map { "X-H\($0): \(String(repeating: "b", count: 40))\r\n" }.joined()
        #expect(try Self.raw(port, "GET \(url) HTTP/1.1\r\nHost: a\r\n\(many)\r\n").status == 431)
    }

    @Test func everyRequestTargetArrivesAsSentOrIsRefusedWithAReason() async throws {
        let appliance = try Appliance(settings: Appliance.interceptionSettings(include: ["localhost"], insecure: ["localhost"]))
        try appliance.start()
        let work = appliance.base.appendingPathComponent("targets")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let r = try Command.run(
            "/usr/bin/python3",
            [
                Self.scripts.appendingPathComponent("targets.py").path, "\(try appliance.proxyPort)",
                appliance.caFile.path, work.path,
            ], timeout: 300)
        struct Results: Decodable {
            var sent: Int
            var unchanged: Int
            var encoded: Int
            var refused: Int
            var failures: [[String: String]]
        }
        let results = try JSONDecoder().decode(Results.self, from: Data(r.stdout.utf8))
        #expect(results.sent == 404)
        #expect(results.failures.isEmpty, "\(results.failures.prefix(5))")
        // Raw UTF-8 arrives percent-encoded (NIO's decoder takes ASCII targets only), plain and intercepted; nothing is refused.
        #expect(results.encoded == 2 && results.refused == 0, "\(results)")
        #expect(results.unchanged == results.sent - 2)
    }

    @Test func aClientThatNeverReadsCostsBoundedMemory() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/big?mb=1").code == 200)
        let before = rssKiB(tunnel)
        // 512 MiB offered, none read: backpressure must stop the origin's side.
        let stalled = try Command.start(
            "/usr/bin/python3",
            [
                Self.scripts.appendingPathComponent("stall.py").path, "\(port)",
                "http://127.0.0.1:\(origin.port)/big?mb=512", "4",
            ], in: appliance.base)
        defer { stalled.process.terminate() }
        try waitUntil("the request is out", timeout: 5) { stalled.stdout.contains("sent") }
        usleep(3_000_000)
        let during = rssKiB(tunnel)
        #expect(during - before < 32 * 1024, "RSS \(before) KiB → \(during) KiB with a client that never reads")
        // Everyone else is served meanwhile.
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/other").code == 200)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "needs prlimit"))
    func runningOutOfDescriptorsNeitherSpinsNorStopsOpenConnections() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        // 64 descriptors: the tunnel uses about 30 of its own, and this
        // machine lets one client open only a hundred or so connections.
        appliance.launchPrefix = ["/usr/bin/prlimit", "--nofile=64:64", "--"]
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        // A keep-alive client that was there first.
        let first = try KeepAliveClient(port: port)
        #expect(try first.get("http://127.0.0.1:\(origin.port)/before").hasPrefix("HTTP/1.1 200"))
        let flood = try Command.start(
            "/usr/bin/python3", [Self.scripts.appendingPathComponent("flood.py").path, "\(port)", "100", "6"], in: appliance.base)
        defer { flood.process.terminate() }
        try waitUntil("the flood is connected", timeout: 10) { !flood.stdout.isEmpty }
        usleep(500_000)
        let cpuBefore = cpuSeconds(tunnel)
        usleep(2_000_000)
        let cpu = cpuSeconds(tunnel) - cpuBefore
        #expect(cpu < 0.6, "the tunnel used \(cpu) s of CPU in 2 s with descriptors exhausted")
        // The connection that was open goes on being served.
        #expect(try first.get("http://127.0.0.1:\(origin.port)/during").hasPrefix("HTTP/1.1 200"))
        let refusals = appliance.log.components(separatedBy: "cannot accept a connection").count - 1
        #expect(refusals >= 1 && refusals <= 3, "logged \(refusals) times")
        flood.process.terminate()
        flood.process.waitForExit()
        try waitUntil("new clients are served again", timeout: 5) {
            try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200
        }
    }
}

/// One keep-alive connection to the proxy, for requests in turn.
final class KeepAliveClient {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { throw Failure("cannot connect to the proxy") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// One GET; returns the reply's head and body as text.
    func get(_ url: String) throws -> String {
        let request = "GET \(url) HTTP/1.1\r\nHost: x\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var reply = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            reply += buffer[0..<n]
            let text = String(decoding: reply, as: UTF8.self)
            if let range = text.range(of: "\r\n\r\n"),
                let lengthLine = text[..<range.lowerBound].split(separator: "\r\n").first(where: {
                    $0.lowercased().hasPrefix("content-length:")
                }),
                let length = Int(lengthLine.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)),
                text.utf8.distance(from: range.upperBound.samePosition(in: text.utf8) ?? text.utf8.endIndex, to: text.utf8.endIndex)
                    >= length
            {
                return text
            }
        }
        return String(decoding: reply, as: UTF8.self)
    }
}

/// User plus system CPU time of a process, from /proc/<pid>/stat.
func cpuSeconds(_ pid: Int32) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based).
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The resident set of a process, in KiB.
func rssKiB(_ pid: Int32) -> Int {
    Int(ProcessProbe.status(pid)["VmRSS"]?.split(separator: " ").first ?? "0") ?? 0
}
