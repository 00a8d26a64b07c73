import Foundation
import Testing

/// SOCKS5 on the proxy port (docs/usage.md, "SOCKS5"): real curl through the real
/// binaries, and tests/socks/probe.py for clients that break the rules.
@Suite(.serialized) struct SOCKSTests {
    struct ProbeReply: Decodable {
        var reply: String
        var closed: Bool
        var timed_out: Bool
    }

    /// Sends each hex chunk to the proxy port and reads what comes back until it closes.
    static func probe(_ port: Int, _ chunks: [String], timeout: Double = 5) throws -> ProbeReply {
        let script = Command.repoRoot.appendingPathComponent("tests/socks/probe.py").path
        let r = try Command.run("/usr/bin/python3", [script, "\(port)", "\(timeout)"] + chunks, timeout: timeout + 10)
        return try JSONDecoder().decode(ProbeReply.self, from: Data(r.stdout.utf8))
    }

    /// curl through the proxy port as a SOCKS5 proxy (`hostname`: socks5h, the proxy resolves).
    static func curl(_ port: Int, _ url: String, hostname: Bool = true, extra: [String] = []) throws -> (
        code: Int, body: String, result: CommandResult
    ) {
        let option = hostname ? "--socks5-hostname" : "--socks5"
        let r = try Command.run(
            "/usr/bin/curl", ["-sS", "-v", "--max-time", "10", option, "127.0.0.1:\(port)", "-w", "\n%{http_code}", url] + extra)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"), r)
    }

    /// The newest row whose url ends with `suffix`, whole (`show --json`).
    static func row(_ appliance: Appliance, _ suffix: String) throws -> [String: Any] {
        func matches(_ row: [String: Any]) -> Bool { (row["url"] as? String)?.hasSuffix(suffix) == true }
        return try appliance.row(
            try appliance.rows("the \(suffix) row is stored") { $0.contains(where: matches) }.first(where: matches)?["id"])
    }

    @Test func socks5ClientsAreInterceptedPassedThroughAndCapturedAsHTTPClientsAre() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance.intercepting(tlsOrigin)
        let originCA = try appliance.trust(tlsOrigin)
        let port = try appliance.proxyPort

        // Plain HTTP, the name resolved by the proxy: captured with its body.
        let plain = try Self.curl(port, "http://localhost:\(origin.port)/socks-plain", extra: ["--data-binary", "hello socks"])
        #expect(plain.code == 200 && plain.body == "origin POST /socks-plain\n", "\(plain.result.stderr)")
        let plainRow = try Self.row(appliance, "/socks-plain")
        #expect(plainRow["front_end"] as? String == "socks5", "\(plainRow)")
        #expect(plainRow["url"] as? String == "http://localhost:\(origin.port)/socks-plain")
        #expect(plainRow.at("request", "body", "text") as? String == "hello socks", "\(plainRow)")
        #expect(plainRow.at("response", "status") as? Int == 200 || plainRow["status"] as? Int == 200, "\(plainRow)")

        // A host on the SSL-proxying list: decrypted, the client sees our leaf.
        let mitm = try Self.curl(port, "https://localhost:\(tlsOrigin.port)/socks-secret", extra: ["--cacert", appliance.caFile.path])
        #expect(mitm.code == 200 && mitm.body == "origin GET /socks-secret\n", "\(mitm.result.stderr)")
        #expect(mitm.result.stderr.contains("Busymate CA"), "\(mitm.result.stderr)")
        let mitmRow = try Self.row(appliance, "/socks-secret")
        #expect(mitmRow["tls"] as? String == "mitm" && mitmRow["front_end"] as? String == "socks5", "\(mitmRow)")

        // The IPv4 address form (curl resolves), a host not on the list: passed through, the origin's own leaf.
        let through = try Self.curl(
            port, "https://127.0.0.1:\(tlsOrigin.port)/socks-open", hostname: false, extra: ["--cacert", originCA.path])
        #expect(through.code == 200 && through.body == "origin GET /socks-open\n", "\(through.result.stderr)")
        #expect(
            through.result.stderr.contains("CN=localhost") && !through.result.stderr.contains("Busymate CA"), "\(through.result.stderr)")
        let tunnel = try Self.row(appliance, "127.0.0.1:\(tlsOrigin.port)")
        #expect(tunnel["tls"] as? String == "passthrough" && tunnel["front_end"] as? String == "socks5", "\(tunnel)")
        // Plain HTTP to an address: captured too.
        let byAddress = try Self.curl(port, "http://127.0.0.1:\(origin.port)/socks-ipv4", hostname: false)
        #expect(byAddress.code == 200 && byAddress.body == "origin GET /socks-ipv4\n", "\(byAddress.result.stderr)")
        #expect(try Self.row(appliance, "/socks-ipv4")["front_end"] as? String == "socks5")

        // HTTP clients on the same port are unchanged.
        let http = try appliance.curl("http://localhost:\(origin.port)/http-still")
        #expect(http.code == 200, "\(http.result.stderr)")
        #expect(try Self.row(appliance, "/http-still")["front_end"] as? String == "proxy")
    }

    @Test func anUnreachableTargetIsAnsweredWithSOCKS5sOwnCodeAndStored() async throws {
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(Appliance.interceptionSettings(include: ["localhost"]))
        try appliance.start()
        let port = try appliance.proxyPort
        // Refused (nothing listens on port 1): 0x05, which curl names.
        let refused = try Self.curl(port, "http://127.0.0.1:1/", hostname: false)
        #expect(refused.result.status == 97, "\(refused.result.status) \(refused.result.stderr)")
        #expect(refused.result.stderr.contains("Connection refused") || refused.result.stderr.contains("(5)"), "\(refused.result.stderr)")
        let raw = try Self.probe(port, ["050100", "050100017f0000010001"])
        #expect(raw.reply.hasPrefix("0500" + "0505"), "\(raw)")
        #expect(raw.closed)
        // A name that does not resolve: host unreachable (0x04).
        let unknown = try Self.probe(
            port, ["050100", "0501000310" + Data("nowhere.invalid.".utf8).map { String(format: "%02x", $0) }.joined() + "0050"])
        #expect(unknown.reply.hasPrefix("0500" + "0504"), "\(unknown)")
        let rows = try appliance.rows("the refusals are stored") { $0.count >= 3 }
        let errors = rows.compactMap { $0["error"] as? String }
        #expect(errors.contains { $0.contains("SOCKS5: cannot connect to 127.0.0.1:1") && $0.hasSuffix("answered 0x05") }, "\(errors)")
        #expect(errors.contains { $0.contains("nowhere.invalid.") && $0.hasSuffix("answered 0x04") }, "\(errors)")
        #expect(rows.allSatisfy { $0["front_end"] as? String == "socks5" }, "\(rows)")
    }

    @Test func malformedHandshakesAreRefusedCleanlyAndTheProxyKeepsServing() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(
            Appliance.interceptionSettings(include: ["localhost"], extra: #", "timeouts": {"request_head_seconds": 2}"#))
        try appliance.start()
        let port = try appliance.proxyPort
        let connect = "05010001" + "7f000001" + String(format: "%04x", origin.port)

        // No method offered: closed without a reply.
        let none = try Self.probe(port, ["0500"])
        #expect(none.closed && none.reply.isEmpty, "\(none)")
        // Only username/password offered: 0xFF, closed.
        let noAuth = try Self.probe(port, ["050102"])
        #expect(noAuth.closed && noAuth.reply == "05ff", "\(noAuth)")
        // BIND and UDP ASSOCIATE: command not supported (0x07).
        for command in ["02", "03"] {
            let reply = try Self.probe(port, ["050100", "05" + command + "00017f0000010050"])
            #expect(reply.closed && reply.reply.hasPrefix("0500" + "0507"), "\(command) \(reply)")
        }
        // An unknown address type: 0x08.
        let atyp = try Self.probe(port, ["050100", "0501000900000050"])
        #expect(atyp.closed && atyp.reply.hasPrefix("0500" + "0508"), "\(atyp)")
        // A domain of length 0: general failure.
        let empty = try Self.probe(port, ["050100", "05010003000050"])
        #expect(empty.closed && empty.reply.hasPrefix("0500" + "0501"), "\(empty)")
        // A truncated request, then the client half-closes: closed, nothing dialled.
        let truncated = try Self.probe(port, ["050100", "05010001", "-"])
        #expect(truncated.closed && truncated.reply == "0500", "\(truncated)")
        // Garbage after the version byte, in one write.
        let garbage = try Self.probe(port, ["05" + String(repeating: "ff", count: 300)])
        #expect(garbage.closed && garbage.reply.hasPrefix("05ff"), "\(garbage)")
        // A wrong version in the request.
        let version = try Self.probe(port, ["050100", "04010001" + "7f0000010050"])
        #expect(version.closed && version.reply == "0500", "\(version)")
        // The greeting, then silence: closed after timeouts.request_head_seconds.
        let silent = try Self.probe(port, ["05"], timeout: 8)
        #expect(silent.closed && !silent.timed_out, "\(silent)")

        // Pipelined greeting and request in one write, as some clients send them: served.
        let pipelined = try Self.probe(
            port,
            [
                "050100" + connect,
                "474554202f706970656c696e656420485454502f312e310d0a486f73743a20610d0a436f6e6e656374696f6e3a20636c6f73650d0a0d0a",
            ])
        #expect(pipelined.reply.hasPrefix("0500" + "0500"), "\(pipelined)")
        #expect(String(decoding: Data(hex: pipelined.reply), as: UTF8.self).contains("origin GET /pipelined"), "\(pipelined)")

        // Still serving, both kinds of client.
        let after = try Self.curl(port, "http://127.0.0.1:\(origin.port)/after")
        #expect(after.code == 200, "\(after.result.stderr)")
        #expect(try appliance.curl("http://127.0.0.1:\(origin.port)/after-http").code == 200)
        let rows = try appliance.rows("the refusals are stored") { rows in
            rows.contains { ($0["error"] as? String)?.contains("within 2 s") == true }
        }
        let errors = rows.compactMap { $0["error"] as? String }
        #expect(errors.contains { $0.contains("SOCKS5: UDP ASSOCIATE is not supported") }, "\(errors)")
        #expect(errors.contains { $0.contains("SOCKS5: an empty domain name") }, "\(errors)")
        #expect(errors.contains { $0.contains("only authentication methods we do not support (0x02)") }, "\(errors)")
        #expect(errors.contains { $0.contains("the client closed in the middle of the SOCKS5 handshake") }, "\(errors)")
        #expect(!appliance.log.contains("Fatal error"))
    }
}

extension Data {
    /// Bytes from hex (test input only: odd or bad digits end it).
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), let byte = UInt8(hex[index..<next], radix: 16) {
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

extension SOCKSTests {
    @Test func aDevicePortSpeaksSOCKS5TooAndItsRowsAreTheDevices() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        let first = Int.random(in: 20000...60000)
        try appliance.writeSettings(
            Appliance.interceptionSettings(
                include: [], extra: #", "devices": {"port_pool": "\#(first)-\#(first + 9)", "host": "127.0.0.1"}"#))
        try appliance.start()
        let added = try appliance.cli(["devices", "add", "phone"])
        let port = added.stdout.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.first { (first...first + 9).contains($0) }
        #expect(added.status == 0 && port != nil, "\(added.stdout) \(added.stderr)")
        guard let port else { return }
        var fetched: (code: Int, body: String, result: CommandResult)?
        try waitUntil("the device port serves SOCKS5", timeout: 5) {
            fetched = try Self.curl(port, "http://127.0.0.1:\(origin.port)/from-phone")
            return fetched?.code == 200
        }
        #expect(fetched?.body == "origin GET /from-phone\n")
        let row = try Self.row(appliance, "/from-phone")
        #expect(row["device"] as? String == "phone" && row["front_end"] as? String == "socks5", "\(row)")
    }
}
