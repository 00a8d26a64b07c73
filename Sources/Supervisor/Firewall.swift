import BusymateShared
import Crypto
import Foundation
import Logging
import Synchronization

/// Transparent mode's nftables table, `inet busymate-<hash>`: the
/// supervisor's (root's) one job on the network. It redirects TCP `transparent.ports`
/// to the transparent listener and DNS to the forwarder, from local
/// processes (but the tunnel's own uid, so its dials do not loop) and from
/// traffic forwarded on `transparent.interfaces`; it rejects QUIC and
/// counts it. Every value in the script is validated by the settings
/// reader (numbers, interface names), and the script goes to `nft -f -`
/// on stdin: no shell.
struct Firewall {
    /// One table per appliance, named after its group directory's real
    /// path: a second appliance on the machine never replaces or removes
    /// this one's, and a restarted one (same directory) finds its own.
    static func table(for group: URL) -> String {
        let path =
            group.path.withCString { pointer in
                realpath(pointer, nil).map { resolved in
                    defer { free(resolved) }
                    return String(cString: resolved)
                }
            } ?? group.standardizedFileURL.path
        let digest = SHA256.hash(data: Data(path.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
        return "busymate-\(digest)"
    }

    /// The whole table, replaced atomically: `nft -f` runs it as one
    /// transaction (the empty `table` line makes the delete safe when there
    /// is none yet).
    static func script(_ settings: AppSettings, tunnelUID: UInt32, table: String) -> String {
        let ports = settings.transparent.ports.map(String.init).joined(separator: ", ")
        let redirectTCP = "meta l4proto tcp th dport { \(ports) } redirect to :\(settings.transparent.port)"
        let redirectDNS = "meta l4proto { tcp, udp } th dport 53 redirect to :\(settings.dns.port)"
        let interfaces = settings.transparent.interfaces.map { "\"\($0)\"" }.joined(separator: ", ")
        var lines = [
            "table inet \(table)",
            "delete table inet \(table)",
            "table inet \(table) {",
            "  counter quic { }",
            "  chain output_nat {",
            "    type nat hook output priority -100; policy accept;",
            "    meta skuid \(tunnelUID) return",
            "    fib daddr type local return",
            "    \(redirectTCP)",
            "    \(redirectDNS)",
            "  }",
            "  chain output_filter {",
            "    type filter hook output priority 0; policy accept;",
            "    meta skuid \(tunnelUID) return",
            "    udp dport 443 counter name \"quic\" reject",
            "  }",
        ]
        if !interfaces.isEmpty {
            lines += [
                "  chain prerouting_nat {",
                "    type nat hook prerouting priority -100; policy accept;",
                // A device's resolver is often the gateway itself: DNS to it is captured too.
                "    iifname { \(interfaces) } \(redirectDNS)",
                "    fib daddr type local return",
                "    iifname { \(interfaces) } \(redirectTCP)",
                "  }",
                "  chain forward_filter {",
                "    type filter hook forward priority 0; policy accept;",
                "    iifname { \(interfaces) } udp dport 443 counter name \"quic\" reject",
                "  }",
            ]
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `nft`, from PATH or the sbin directories (a unit's PATH may lack them).
    static func nftPath() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let dirs = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        return dirs.map { "\($0)/nft" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func install(_ script: String) throws(Failure) {
        _ = try run(["-f", "-"], input: script)
    }

    /// Idempotent: no table is not an error.
    static func remove(table: String) throws(Failure) {
        do {
            _ = try run(["delete", "table", "inet", table], input: nil)
        } catch {
            if error.description.contains("No such file or directory") { return }
            throw error
        }
    }

    /// No nft, or no right to use it: no table of ours can exist either.
    static func couldNotHaveInstalled(_ error: Failure) -> Bool {
        error.description.contains("not installed") || error.description.contains("Operation not permitted")
    }

    static func isInstalled(table: String) -> Bool {
        (try? run(["list", "table", "inet", table], input: nil)) != nil
    }

    /// Packets the QUIC counter has seen (nil: no table).
    static func quicPackets(table: String) -> Int? {
        guard let output = try? run(["-j", "list", "counter", "inet", table, "quic"], input: nil),
            let root = try? JSONParser.parse(output), case let .array(items)? = root["nftables"]?.value
        else { return nil }
        for item in items {
            if case let .number(text)? = item["counter"]?["packets"]?.value { return Int(text) }
        }
        return nil
    }

    /// Runs nft; its stdout, or its stderr as the failure. At most 10 s.
    private static func run(_ arguments: [String], input: String?) throws(Failure) -> String {
        guard let nft = nftPath() else { throw Failure(description: "nft is not installed (apt-get install nftables)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nft)
        process.arguments = arguments
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot run \(nft): \(error)")
        }
        // A watchdog: reading to the end below waits for nft to exit.
        let finished = Atomic<Bool>(false)
        let watchdog = Thread {
            for _ in 0..<1000 where !finished.load(ordering: .relaxed) { usleep(10_000) }
            if !finished.load(ordering: .relaxed), process.isRunning { process.terminate() }
        }
        watchdog.start()
        defer { finished.store(true, ordering: .relaxed) }
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try? stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        if process.terminationReason == .uncaughtSignal {
            throw Failure(description: "nft did not finish within 10 s (or was killed)")
        }
        guard process.terminationStatus == 0 else {
            let text = String(decoding: err, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: text.isEmpty ? "nft exited with status \(process.terminationStatus)" : text)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
