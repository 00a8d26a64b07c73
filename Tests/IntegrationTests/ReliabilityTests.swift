import BusymateShared
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What goes wrong around the appliance (files, disk, store, children) and
/// must be said as what it is, with nothing lost.
@Suite(.serialized) struct ReliabilityTests {
    @Test func aCADeletedWhileRunningIsNoticed() async throws {
        let appliance = try Appliance()
        try appliance.start()
        #expect(try appliance.status().bool("ca.present") == true)
        #expect(try appliance.status().isNull("ca.error"))
        unlink(appliance.group.appendingPathComponent("ca.key").path)
        try waitUntil("status says ca.key is missing", timeout: 3) { try appliance.status().string("ca.error") == "ca.key is missing" }
        try waitUntil("the tunnel stops intercepting", timeout: 3) {
            (try appliance.status().string("tunnel.interception") ?? "").hasPrefix("off")
        }
        unlink(appliance.group.appendingPathComponent("ca.pem").path)
        try waitUntil("status says ca.pem is missing", timeout: 3) { try appliance.status().bool("ca.present") == false }
    }

    @Test func settingsThatCannotBeReadSayWhy() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = try appliance.status().int("tunnel.pid")

        // 5 MiB of valid JSON: refused unread, nothing stalls or restarts.
        let big =
            "{\"log_level\": \"debug\", \"proxy\": {\"listen\": [\"127.0.0.1:0\"]}, \"pad\": \"" + String(repeating: "x", count: 5 << 20)
            + "\"}\n"
        try AtomicFile.write(Data(big.utf8), to: appliance.settingsURL, mode: 0o664)
        try waitUntil("both processes refuse the big file", timeout: 3) {
            let s = try appliance.status()
            return (s.string("settings.error") ?? "").contains("the limit is 4.0 MiB")
                && (s.string("tunnel.settings_error") ?? "").contains("the limit is 4.0 MiB")
        }
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/still").code == 200)
        #expect(try appliance.status().int("tunnel.pid") == tunnel)

        // A directory where the file should be.
        unlink(appliance.settingsURL.path)
        try FileManager.default.createDirectory(at: appliance.settingsURL, withIntermediateDirectories: false)
        try waitUntil("status says it is a directory", timeout: 3) {
            (try appliance.status().string("settings.error") ?? "").contains("is a directory")
        }
        rmdir(appliance.settingsURL.path)

        // Mode 000: the tunnel (not root) cannot read it and says so.
        try AtomicFile.write(Data(Appliance.defaultSettings.utf8), to: appliance.settingsURL, mode: 0o000)
        if geteuid() == 0 {
            try waitUntil("the tunnel says permission denied", timeout: 3) {
                (try appliance.status().string("tunnel.settings_error") ?? "").contains("permission denied")
            }
        }
        chmod(appliance.settingsURL.path, 0o664)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
    }

    @Test func aTunnelWithoutAStoreKeepsProxying() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        // Not a file it may open: the tunnel proxies without capture, and stays up.
        try FileManager.default.createDirectory(
            at: appliance.group.appendingPathComponent("capture.sqlite"), withIntermediateDirectories: true)
        try appliance.start()
        let tunnel = try appliance.status().int("tunnel.pid")
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/uncaptured").code == 200)
        usleep(1_500_000)
        let status = try appliance.status()
        #expect(status.int("tunnel.pid") == tunnel, "the tunnel was restarted: \(appliance.log)")
        #expect(status.string("tunnel.state") == "ready")
        #expect(
            status.string("tunnel.store")?.contains("proxying without capture") == true,
            "\(status.string("tunnel.store") ?? "no store field")")
    }

    @Test func aCorruptStoreIsMovedAsideAndCaptureGoesOn() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/before").code == 200)
        try waitUntil("the exchange is stored", timeout: 3) { try appliance.rows().count == 1 }
        appliance.stop()
        // Garbage over the whole file: SQLite's "file is not a database".
        // A WAL left behind (a tunnel that could not checkpoint as it
        // stopped) would still hold a good page 1: it goes too.
        let store = appliance.group.appendingPathComponent("capture.sqlite")
        try Data(repeating: 0x5A, count: 64 << 10).write(to: store)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store.path + suffix) }
        let listed = try appliance.cli(["list"])
        #expect(listed.status != 0)
        #expect(listed.stderr.contains("the capture store is corrupt"), "\(listed.stderr)")
        #expect(!listed.stderr.contains("SQLite error"), "\(listed.stderr)")

        try appliance.start()
        #expect(appliance.log.contains("the capture store was corrupt; moved it aside"), "\(appliance.log)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: appliance.group.path).filter { $0.hasPrefix("corrupt-") }
        #expect(aside.count == 1)
        let kept = appliance.group.appendingPathComponent(aside.first ?? "none").appendingPathComponent("capture.sqlite")
        #expect(try Data(contentsOf: kept) == Data(repeating: 0x5A, count: 64 << 10))
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/after").code == 200)
        let rows = try appliance.rows("the new store has the new exchange", until: { $0.count == 1 })
        #expect((rows.first?["url"] as? String)?.hasSuffix("/after") == true)
        #expect(try appliance.status().string("tunnel.store") == "ok")
    }

    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aFullDiskIsShownAndNothingIsLost() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try FileManager.default.createDirectory(at: appliance.group, withIntermediateDirectories: true)
        // The filler takes whatever is left, so the disk is full whatever the
        // size; 6 MiB leaves room, once it goes, for the 200 waiting exchanges
        // of ~20 KB of pages each to go into the WAL in one commit (4 MiB was
        // within a few pages of that, and rows grew by two columns).
        let mount = try Command.run("/bin/mount", ["-t", "tmpfs", "-o", "size=6m,mode=0755", "busymate-test", appliance.group.path])
        try #require(mount.status == 0, "\(mount.stderr)")
        defer {
            appliance.stop()
            _ = try? Command.run("/bin/umount", ["-l", appliance.group.path])
        }
        try appliance.writeSettings(Appliance.defaultSettings)
        try appliance.start()
        let port = try appliance.proxyPort
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/first").code == 200)
        try waitUntil("the first exchange is stored", timeout: 3) { try appliance.rows().count == 1 }
        // Fill the disk.
        let filler = appliance.group.appendingPathComponent("filler")
        _ = try Command.run("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=64k", "count=1000"])
        // 200 exchanges of 3 KB each on one keep-alive connection: the WAL must grow.
        let urls = (0..<200).map { "http://127.0.0.1:\(origin.port)/full-\($0)?" + String(repeating: "q", count: 3000) }
        let sent = try Command.run(
            "/usr/bin/curl",
            ["-sS", "--max-time", "30", "-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "-w", "%{http_code}\n"]
                + urls.flatMap { [$0, "-o", "/dev/null"] })
        #expect(sent.stdout.split(separator: "\n").filter { $0 == "200" }.count == 200, "\(sent.stderr)")
        try waitUntil("status says the disk is full", timeout: 10) {
            (try appliance.status().string("tunnel.store") ?? "").contains("full")
        }
        let text = try appliance.cli(["status"]).stdout
        #expect(text.contains("✗ capture"), "\(text)")
        unlink(filler.path)
        try waitUntil("every exchange is stored once there is room", timeout: 10) { try appliance.rows().count == 201 }
        try waitUntil("status is ok again", timeout: 5) { try appliance.status().string("tunnel.store") == "ok" }
    }

    @Test(.enabled(if: geteuid() == 0, "the tunnel's user differs from ours only as root"))
    func aGroupDirectoryTheTunnelCannotReachIsRefusedAtStart() async throws {
        let appliance = try Appliance()
        chmod(appliance.base.path, 0o700)
        let r = try Command.run(
            Command.binary("busymate-app"), ["--group", appliance.group.path],
            environment: ["BUSYMATE_LOG": "stderr", "PATH": "/usr/bin:/bin"], timeout: 10)
        #expect(r.status == 78)
        #expect(r.stderr.contains("cannot enter \(appliance.base.path)"), "\(r.stderr)")
        #expect(appliance.tunnelPIDs().isEmpty)
    }

    @Test(.enabled(if: geteuid() == 0, "the tunnel wrapper must run as root to drop"))
    func aReplacementThatDiesAtOnceLeavesTheRunningTunnelInCharge() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        // The first start execs the real tunnel; later ones die at once while the marker exists.
        let marker = appliance.base.appendingPathComponent("started-once")
        let wrapper = appliance.base.appendingPathComponent("tunnel-wrapper.sh")
        try Data(
            """
            #!/bin/sh
            if [ -e '\(marker.path)' ]; then exit 3; fi
            : > '\(marker.path)'
            exec '\(Command.binary("busymate-tunnel"))' "$@"

            """.utf8
        ).write(to: wrapper)
        chmod(wrapper.path, 0o755)
        appliance.supervisorArguments = ["--tunnel", wrapper.path]
        try appliance.start()
        let first = try appliance.status().int("tunnel.pid")
        for _ in 0..<2 {
            #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
            usleep(700_000)
            let s = try appliance.status()
            #expect(s.int("tunnel.pid") == first)
            #expect(s.string("tunnel.state") == "ready")
            #expect(s.bool("tunnel.crash_loop") == false)
            #expect((s.string("tunnel.last_exit") ?? "").contains("before taking over"), "\(s.string("tunnel.last_exit") ?? "nil")")
            #expect(appliance.tunnelPIDs().count == 1)
            #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/served").code == 200)
        }
        // Once replacements work again, a restart replaces it as usual.
        unlink(marker.path)
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        try waitUntil("a new tunnel serves alone", timeout: 10) {
            let s = try appliance.status()
            return s.int("tunnel.pid") != first && s.string("tunnel.state") == "ready" && appliance.tunnelPIDs().count == 1
        }
    }

    @Test(.enabled(if: geteuid() == 0, "the tunnel wrapper must run as root to drop"))
    func aReplacementThatHangsBeforeAttachingIsKilledAndStatusShowsBoth() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        // The first start execs the real tunnel; later ones hang without attaching while the marker exists.
        let marker = appliance.base.appendingPathComponent("started-once")
        let wrapper = appliance.base.appendingPathComponent("tunnel-wrapper.sh")
        try Data(
            """
            #!/bin/sh
            if [ -e '\(marker.path)' ]; then exec sleep 600; fi
            : > '\(marker.path)'
            exec '\(Command.binary("busymate-tunnel"))' "$@"

            """.utf8
        ).write(to: wrapper)
        chmod(wrapper.path, 0o755)
        appliance.supervisorArguments = ["--tunnel", wrapper.path, "--attach-deadline", "3"]
        try appliance.start()
        let first = try appliance.status().int("tunnel.pid")
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        usleep(1_000_000)
        // While it is pending, status names the tunnel that serves, and the replacement.
        let pending = try appliance.status()
        #expect(pending.int("tunnel.pid") == first)
        #expect(pending.string("tunnel.state") == "ready")
        let replacement = try #require(pending.int("tunnel.replacement.pid"), "\(pending.raw)")
        #expect(replacement != first)
        #expect(pending.string("tunnel.replacement.state") == "starting" && pending.bool("tunnel.replacement.attached") == false)
        #expect(try appliance.cli(["status"]).stdout.contains("replacement"))
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/while-pending").code == 200)
        // Past the deadline it is killed and reported; the first tunnel stays in charge.
        try waitUntil("the replacement is given up", timeout: 8) { try appliance.status().value("tunnel.replacement.pid") == nil }
        let after = try appliance.status()
        #expect(after.int("tunnel.pid") == first && after.string("tunnel.state") == "ready")
        #expect(
            (after.string("tunnel.last_exit") ?? "").contains("did not attach within 3 s"), "\(after.string("tunnel.last_exit") ?? "nil")")
        #expect(after.bool("tunnel.crash_loop") == false)
        #expect(kill(Int32(replacement), 0) != 0, "the hung replacement is gone")
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/after-deadline").code == 200)
        #expect(appliance.log.contains("did not attach"))
    }
}
