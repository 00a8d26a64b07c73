import BusymateShared
import Crypto
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End to end: the real supervisor and tunnel, real curl, a real origin on
/// loopback, a real group directory.
// A test that hangs (a wait that never ends) fails by name instead of holding CI to its limit.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ApplianceTests {
    @Test func forwardsPlainHTTPWithKeepAliveAndTunnelsConnect() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort

        // Two requests in one curl run: the second reuses the connection.
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-x", "http://127.0.0.1:\(port)",
                "-w", "[%{http_code} %{num_connects}]\n", "http://127.0.0.1:\(origin.port)/one?x=1", "http://127.0.0.1:\(origin.port)/two",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "origin GET /one?x=1\n[200 1]\norigin GET /two\n[200 0]\n")

        let head = try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/h", extra: ["-I"])
        #expect(head.code == 200)

        // CONNECT: the client talks TLS to the origin itself and trusts only
        // the origin's own certificate (passthrough, no interception).
        let caFile = appliance.base.appendingPathComponent("origin.pem")
        try Data((tlsOrigin.certificatePEM ?? "").utf8).write(to: caFile)
        let tls = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", caFile.path, "-x", "http://127.0.0.1:\(port)",
                "-w", "[%{http_code} %{num_connects}]\n", "https://localhost:\(tlsOrigin.port)/a", "https://localhost:\(tlsOrigin.port)/b",
            ])
        #expect(tls.status == 0, "\(tls.stderr)")
        #expect(tls.stdout == "origin GET /a\n[200 1]\norigin GET /b\n[200 0]\n")

        // The tunnel publishes its counters twice a second.
        try waitUntil("the counters show the traffic", timeout: 2) {
            let s = try appliance.status()
            // 2 GETs, 1 HEAD, and 1 CONNECT (which carried both HTTPS requests).
            return s.int("counters.requests_total") == 4 && (s.int("counters.bytes_to_clients") ?? 0) > 0
        }
    }

    @Test func answersUnreachableHostsAndBadRequestsClearly() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let refused = try Command.curl(proxyPort: port, "http://127.0.0.1:1/")
        #expect(refused.code == 502)
        #expect(refused.body.contains("cannot connect to 127.0.0.1:1"))
        let direct = try Command.run("/usr/bin/curl", ["-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/not-a-proxy-request"])
        #expect(direct.stdout.hasSuffix("\n400"))
        #expect(direct.stdout.contains("absolute-form"))
        // The tunnel still serves after both.
        #expect(try appliance.status().string("tunnel.state") == "ready")
    }

    @Test func tunnelRestartUnderLoadRefusesNothingAndKeepsTheSupervisor() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let before = try appliance.status()
        let supervisorPID = before.int("supervisor.pid")
        let firstTunnel = before.int("tunnel.pid")

        // A client hammering the proxy, one new connection per request.
        let codes = appliance.base.appendingPathComponent("codes.txt")
        let loop = Process()
        loop.executableURL = URL(fileURLWithPath: "/bin/sh")
        let errors = appliance.base.appendingPathComponent("curl-errors.txt")
        loop.arguments = [
            "-c",
            "for i in $(seq 1 300); do curl -sS -o /dev/null --max-time 10 -w '%{http_code}\\n' -x http://127.0.0.1:\(port) http://127.0.0.1:\(origin.port)/$i 2>>\(errors.path); done > \(codes.path)",
        ]
        try loop.runSerialized()
        var tunnels: Set<Int> = []
        for _ in 0..<3 {
            usleep(300_000)
            let r = try appliance.cli(["tunnel", "restart"])
            #expect(r.status == 0, "\(r.stderr)")
            try waitUntil("the new tunnel is ready", timeout: 5) {
                let s = try appliance.status()
                return s.string("tunnel.state") == "ready" && s.int("tunnel.pid") != firstTunnel
                    && !tunnels.contains(s.int("tunnel.pid") ?? 0)
            }
            tunnels.insert(try appliance.status().int("tunnel.pid") ?? 0)
        }
        loop.waitForExit()
        let results = try String(contentsOf: codes, encoding: .utf8).split(separator: "\n")
        #expect(results.count == 300)
        let curlErrors = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        let trouble = appliance.log.split(separator: "\n").filter {
            $0.contains(" warning ") || $0.contains(" error ") || $0.contains("notice connect")
        }
        #expect(
            results.allSatisfy { $0 == "200" },
            "non-200 results: \(results.filter { $0 != "200" }); curl said: \(curlErrors); supervisor log: \(trouble.joined(separator: "\n"))"
        )
        let after = try appliance.status()
        #expect(after.int("supervisor.pid") == supervisorPID)
        #expect(after.int("tunnel.pid") != firstTunnel)
        #expect(tunnels.count == 3)
        // The replaced tunnels drained and exited.
        try waitUntil("only one tunnel is left", timeout: 5) { appliance.tunnelPIDs().count == 1 }
        // And wrote what they captured before they went: every request is in the store.
        var stored = 0
        try? waitUntil("all 300 exchanges are stored", timeout: 3) {
            let r = try appliance.cli(["list", "--json", "--limit", "1000"])
            stored = (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [Any])?.count ?? 0
            return stored == 300
        }
        #expect(stored == 300)
    }

    @Test func aRestartLetsRequestsInFlightFinish() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let old = try appliance.status().int("tunnel.pid") ?? 0
        let out = appliance.base.appendingPathComponent("slow.txt")
        let slow = Process()
        slow.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        slow.arguments = [
            "-sS", "-o", out.path, "-w", "%{http_code}", "-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(origin.port)/slow?ms=1200",
        ]
        let code = Pipe()
        slow.standardOutput = code
        try slow.runSerialized()
        usleep(300_000)
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        try waitUntil("the old tunnel is draining", timeout: 2) {
            let current = try appliance.status().int("tunnel.pid") ?? old
            return ProcessProbe.status(Int32(old))["State"] != nil && current != old
        }
        slow.waitForExit()
        #expect(String(decoding: code.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "200")
        #expect(try String(contentsOf: out, encoding: .utf8) == "origin GET /slow?ms=1200\n")
        // Drained before its 2 s grace ran out, then gone.
        try waitUntil("the old tunnel has exited", timeout: 3) { !appliance.tunnelPIDs().contains(Int32(old)) }
    }

    @Test func aFrozenTunnelIsReplacedAndWaitingClientsAreServed() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let frozen = try appliance.status().int("tunnel.pid") ?? 0
        kill(Int32(frozen), SIGSTOP)
        // Sent while nobody accepts: it waits in the listening socket's queue.
        let waiting = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "15", "-w", "\n%{http_code}", "-x", "http://127.0.0.1:\(port)",
                "http://127.0.0.1:\(origin.port)/waited",
            ], timeout: 20)
        #expect(waiting.stdout.hasSuffix("\n200"), "\(waiting.stdout) \(waiting.stderr)")
        let status = try appliance.status()
        #expect(status.int("tunnel.pid") != frozen)
        #expect(status.string("tunnel.last_exit")?.contains("signal 9") == true)
        #expect(appliance.log.contains("the tunnel stopped answering; killing it"))
    }

    @Test func aStaleStatusNamingAnotherGroupsTunnelIsNotAdopted() async throws {
        let other = try Appliance()
        try other.start()
        let othersTunnel = try other.status().int("tunnel.pid") ?? 0
        // As if this group's last tunnel pid had been reused by the other group's.
        let appliance = try Appliance()
        try FileManager.default.copyItem(
            at: other.group.appendingPathComponent("status.json"),
            to: appliance.group.appendingPathComponent("status.json"))
        try appliance.start()
        let mine = try appliance.status()
        #expect(mine.int("tunnel.pid") != othersTunnel)
        #expect(mine.bool("tunnel.adopted") == false)
        #expect(!appliance.log.contains("a tunnel is already running"))
        // The other group's tunnel is left alone (a wrong adoption kills it after 3 s).
        usleep(3_500_000)
        #expect(ProcessProbe.isTunnel(Int32(othersTunnel), servingGroup: other.group.path))
        #expect(try other.status().int("tunnel.pid") == othersTunnel)
    }

    @Test func aKilledTunnelIsBackWithinASecond() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let old = try appliance.status().int("tunnel.pid") ?? 0
        let killedAt = Date()
        kill(Int32(old), SIGKILL)
        try waitUntil("a new tunnel is ready", timeout: 1) {
            let s = try appliance.status()
            return s.string("tunnel.state") == "ready" && (s.int("tunnel.pid") ?? old) != old
        }
        let elapsed = Date().timeIntervalSince(killedAt)
        #expect(elapsed < 1, "took \(elapsed)s")
        let status = try appliance.status()
        #expect(status.int("tunnel.restarts") == 1)
        #expect(status.string("tunnel.last_exit")?.contains("signal 9") == true)
        #expect(try Command.curl(proxyPort: appliance.proxyPort, "http://127.0.0.1:\(origin.port)/").code == 200)
        #expect(appliance.log.contains("the tunnel exited unexpectedly; restarting it"))
    }

    @Test func aKilledSupervisorLeavesCaptureRunningAndTheNextOneAdoptsIt() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = try appliance.status().int("tunnel.pid")
        appliance.killSupervisor()

        for i in 0..<5 {
            #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/alone\(i)").code == 200)
        }
        let orphaned = try appliance.status()
        #expect(orphaned.bool("supervisor.running") == false)
        #expect(orphaned.int("tunnel.pid") == tunnel)

        try appliance.start()
        // Adoption is the new supervisor's first look around: give it that moment.
        try? waitUntil("the new supervisor reports the adopted tunnel", timeout: 3) {
            try appliance.status().bool("tunnel.adopted") == true
        }
        let adopted = try appliance.status()
        #expect(adopted.int("tunnel.pid") == tunnel)
        #expect(adopted.bool("tunnel.adopted") == true)
        #expect(appliance.tunnelPIDs() == [Int32(tunnel ?? 0)])
        #expect(try appliance.proxyPort == port)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/adopted").code == 200)

        // The adopted tunnel's listeners are the supervisor's again: a
        // restart hands the same port to a new tunnel.
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        try waitUntil("a new tunnel is ready", timeout: 5) {
            let s = try appliance.status()
            return s.string("tunnel.state") == "ready" && s.int("tunnel.pid") != tunnel
        }
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
    }

    private func fileSHA(_ url: URL) throws -> String {
        SHA256.hash(data: try Data(contentsOf: url)).map { String(format: "%02x", $0) }.joined()
    }

    private func expectBothApplied(_ appliance: Appliance, within seconds: Double = 1) throws {
        let sha = try fileSHA(appliance.settingsURL)
        try waitUntil("both processes applied \(sha.prefix(12))", timeout: seconds) {
            let s = try appliance.status()
            return s.string("supervisor.settings_sha256") == sha && s.string("tunnel.settings_sha256") == sha
        }
    }

    @Test func savedSettingsReachBothProcessesHoweverTheyAreSaved() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let file = appliance.settingsURL.path
        let pids = try appliance.status()

        // An editor's write-and-rename.
        try Command.shell("sed 's/\"debug\"/\"info\"/' \(file) > \(file).new && mv \(file).new \(file)")
        try expectBothApplied(appliance)
        // sed -i.
        try Command.shell("sed -i 's/\"info\"/\"notice\"/' \(file)")
        try expectBothApplied(appliance)
        // An in-place write.
        try Command.shell("sed 's/\"notice\"/\"debug\"/' \(file) > \(file).copy && cat \(file).copy > \(file)")
        try expectBothApplied(appliance)

        let after = try appliance.status()
        #expect(after.int("supervisor.pid") == pids.int("supervisor.pid"))
        #expect(after.int("tunnel.pid") == pids.int("tunnel.pid"))
    }

    @Test func aNewListenAddressIsBoundLive() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let tunnel = try appliance.status().int("tunnel.pid")
        // A free port: bind 0, read it, let it go.
        let probe = try ListenSocket.bind(ListenAddress(host: "127.0.0.1", port: 0))
        let freePort = Int(probe.bound.split(separator: ":").last ?? "") ?? 0
        close(probe.descriptor)
        try Data(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:\(freePort)"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2}}
            """.utf8
        ).write(to: appliance.settingsURL)
        try expectBothApplied(appliance)
        try waitUntil("the new port serves", timeout: 2) {
            try Command.curl(proxyPort: freePort, "http://127.0.0.1:\(origin.port)/moved").code == 200
        }
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
        #expect(try appliance.proxyPort == freePort)
    }

    @Test func invalidSettingsKeepTheLastGoodOnesAndSayWhere() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let good = try appliance.status().string("tunnel.settings_sha256")

        try Data("{\n  \"log_level\": \"debug\",\n  \"proxy\": {\"listen\": [\"127.0.0.1:0\"]}\n  \"mode\": \"proxy\"\n}\n".utf8).write(
            to: appliance.settingsURL)
        try waitUntil("status shows the error", timeout: 1) { try appliance.status().bool("settings.valid") == false }
        let broken = try appliance.status()
        #expect(broken.string("settings.error")?.hasPrefix("4:3: ") == true, "\(broken.string("settings.error") ?? "nil")")
        #expect(broken.string("supervisor.settings_sha256") == good)
        #expect(broken.string("tunnel.settings_sha256") == good)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/still").code == 200)
        #expect(try appliance.cli(["status"]).stdout.contains("invalid: 4:3:"))

        try Data("{\"proxy\": {\"listen\": [\"nine\"]}}".utf8).write(to: appliance.settingsURL)
        try waitUntil("status shows the value error", timeout: 1) {
            try appliance.status().string("settings.error")?.contains("proxy.listen[0]") == true
        }

        try Data(Appliance.defaultSettings.replacingOccurrences(of: "debug", with: "info").utf8).write(to: appliance.settingsURL)
        try waitUntil("valid again", timeout: 1) {
            let s = try appliance.status()
            return s.bool("settings.valid") == true && s.isNull("settings.error")
        }
        try expectBothApplied(appliance)
        #expect(appliance.log.contains("settings.json is invalid; keeping the last good settings"))
    }

    @Test func stopClosesTheProxyPortAndStartOpensIt() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        #expect(try appliance.cli(["tunnel", "stop"]).status == 0)
        try waitUntil("no tunnel is left", timeout: 5) { appliance.tunnelPIDs().isEmpty }
        #expect(try appliance.status().string("tunnel.state") == "stopped")
        let refused = try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/")
        #expect(refused.result.status == 7, "curl: \(refused.result.stderr)")
        #expect(try appliance.cli(["tunnel", "start"]).status == 0)
        try waitUntil("ready again", timeout: 5) { try appliance.status().string("tunnel.state") == "ready" }
        // proxy.listen says port 0, so the reopened port is a new one.
        #expect(try Command.curl(proxyPort: appliance.proxyPort, "http://127.0.0.1:\(origin.port)/").code == 200)
    }

    @Test func notificationsAreSeenLiveByTailEvents() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let out = appliance.base.appendingPathComponent("events.txt")
        let tail = Process()
        tail.executableURL = URL(fileURLWithPath: Command.binary("busymate"))
        tail.arguments = ["tail", "--events", "--group", appliance.group.path]
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        tail.standardOutput = try FileHandle(forWritingTo: out)
        try tail.runSerialized()
        try waitUntil("tail has bound its socket", timeout: 3) {
            (try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path)).contains {
                $0.hasPrefix("cli-")
            }
        }
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        // The old tunnel reports draining, then the new one ready.
        try waitUntil("tail shows the new tunnel's readiness", timeout: 3) {
            try String(contentsOf: out, encoding: .utf8).split(separator: "\n").contains {
                $0.contains("tunnelStateChanged from tunnel-") && $0.hasSuffix(" ready")
            }
        }
        kill(tail.processIdentifier, SIGTERM)
        tail.waitForExit()
        let lines = try String(contentsOf: out, encoding: .utf8)
        #expect(lines.contains(" ready"))
        // tail removes its own socket when it ends.
        #expect(
            try !FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path).contains {
                $0.hasPrefix("cli-")
            })
    }

    @Test func aMissingGroupDirectoryIsCreatedFromTheSkeleton() async throws {
        let appliance = try Appliance(settings: nil)
        #expect(!FileManager.default.fileExists(atPath: appliance.group.path))
        let r = try Command.run(
            Command.binary("busymate"), ["status", "--json"],
            environment: ["BUSYMATE_GROUP": appliance.group.path, "PATH": "/usr/bin:/bin"])
        // No supervisor yet: status says so, and exits 3.
        #expect(r.status == 3)
        #expect(r.stdout.contains("\"running\": false"))
        try appliance.start(patchingDefaultListenTo: "127.0.0.1:0")
        let settings = try String(contentsOf: appliance.settingsURL, encoding: .utf8)
        #expect(settings.contains("\"drain_seconds\": 5") && !settings.contains("\"user\""))
        for name in ["ca.pem", "ca.der", "ca.key", "README.md", "notify", "bodies", "control.sock", "status.json"] {
            #expect(FileManager.default.fileExists(atPath: appliance.group.appendingPathComponent(name).path), "\(name)")
        }
        var st = stat()
        stat(appliance.group.appendingPathComponent("ca.key").path, &st)
        #expect(st.st_mode & 0o777 == 0o640)
        stat(appliance.group.appendingPathComponent("ca.pem").path, &st)
        #expect(st.st_mode & 0o777 == 0o644)
        #expect(FileManager.default.fileExists(atPath: appliance.base.appendingPathComponent("private").path))
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func asRootTheTunnelRunsUnprivileged() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let pid = try appliance.status().int("tunnel.pid") ?? 0
        let proc = ProcessProbe.status(Int32(pid))
        let uids = proc["Uid"]?.split(whereSeparator: { $0 == "\t" || $0 == " " }) ?? []
        #expect(uids.count == 4 && uids.allSatisfy { $0 != "0" }, "Uid: \(proc["Uid"] ?? "nil")")
        #expect(proc["CapEff"] == "0000000000000000")
        #expect(proc["CapPrm"] == "0000000000000000")
        #expect(proc["CapInh"] == "0000000000000000")
        #expect(proc["CapAmb"] == "0000000000000000")
        // The bounding set is emptied too: nothing it executes could regain a capability.
        #expect(proc["CapBnd"] == "0000000000000000")
        #expect(proc["NoNewPrivs"] == "1")
        // Capabilities and no-new-privs are per thread: none started before the drop.
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        #expect(!threads.isEmpty)
        for tid in threads {
            // /proc/<tid>/status is the thread's own; empty when it is gone meanwhile.
            let fields = ProcessProbe.status(Int32(tid) ?? 0)
            if fields.isEmpty { continue }
            for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
                #expect(fields[key] == "0000000000000000", "thread \(tid): \(key) \(fields[key] ?? "nil")")
            }
            #expect(fields["NoNewPrivs"] == "1", "thread \(tid)")
        }
        #expect(try appliance.status().int("tunnel.uid") == Int(PrivilegeDrop.lookupUser("busymate") ?? 0))
        // It can read the CA key and write the store's directory, not replace the CA.
        var st = stat()
        stat(appliance.group.path, &st)
        #expect(st.st_mode & 0o7777 == 0o3775)
        #expect(st.st_gid == PrivilegeDrop.lookupGroup("busymate"))
    }

    @Test(.enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func aRootTunnelWithoutSetpcapRefusesToServe() async throws {
        // Started as root from a parent whose bounding set lacks CAP_SETPCAP
        // (a unit without it), the tunnel cannot empty its own: it refuses.
        let appliance = try Appliance()
        let r = try Command.run(
            "/usr/bin/setpriv", ["--bounding-set", "-setpcap", Command.binary("busymate-tunnel"), "--group", appliance.group.path],
            environment: ["BUSYMATE_LOG": "stderr", "PATH": "/usr/bin:/bin"])
        #expect(r.status == TunnelExitStatus.cannotStart, "exit \(r.status); stderr: \(r.stderr)")
        #expect(r.stderr.contains("cannot empty the capability bounding set"), "\(r.stderr)")
        #expect(r.stderr.contains("CAP_SETPCAP"), "\(r.stderr)")
    }

    @Test(.enabled(if: geteuid() == 0, "switching to another user needs root"))
    func theControlSocketRefusesStrangers() async throws {
        let appliance = try Appliance()
        try appliance.start()
        // nobody is neither root nor in group busymate.
        chmod(appliance.group.path, 0o3775)
        let r = try Command.run(
            "/usr/bin/setpriv",
            [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                Command.binary("busymate"), "tunnel", "restart", "--group", appliance.group.path,
            ])
        #expect(r.status != 0)
        #expect(r.stderr.contains("permission denied"), "\(r.stderr)")
        let tunnel = try appliance.status().int("tunnel.pid")
        usleep(200_000)
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
    }

    @Test func sigtermStopsTheTunnelFirst() async throws {
        let appliance = try Appliance()
        try appliance.start()
        #expect(appliance.tunnelPIDs().count == 1)
        #expect(appliance.stop() == 0)
        try waitUntil("no tunnel is left", timeout: 3) { appliance.tunnelPIDs().isEmpty }
        #expect(!FileManager.default.fileExists(atPath: appliance.group.appendingPathComponent("control.sock").path))
    }
}
