import BusymateShared
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Holes found by probing from outside: what a member of group busymate, a
/// stranger or a planted file must not be able to do.
@Suite(.serialized) struct SecurityTests {
    private func uid(of pid: Int32) -> String? {
        ProcessProbe.status(pid)["Uid"]?.split(whereSeparator: { $0 == "\t" || $0 == " " }).first.map(String.init)
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func settingsJSONCannotChooseWhomTheTunnelRunsAs() async throws {
        // A group member writes settings.json (0664): it must not pick the user.
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]},
                 "tunnel": {"user": "nobody", "group": "nogroup", "drain_seconds": 2}}

                """)
        try appliance.start()
        let busymate = "\(PrivilegeDrop.lookupUser("busymate") ?? 0)"
        let first = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: first) == busymate)
        let restart = try appliance.cli(["tunnel", "restart"])
        #expect(restart.status == 0, "\(restart.stderr)")
        try waitUntil("the new tunnel is ready", timeout: 10) {
            let s = try appliance.status()
            return s.int("tunnel.pid").map(Int32.init) != first && s.string("tunnel.state") == "ready"
        }
        let second = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: second) == busymate)
        let unknown = try appliance.status().value("settings.unknown_keys") as? [String] ?? []
        #expect(unknown.contains("tunnel.user") && unknown.contains("tunnel.group"), "\(unknown)")
        #expect(appliance.log.contains("settings.json's tunnel.user is ignored"), "\(appliance.log)")
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func theSupervisorsCommandLineChoosesWhomTheTunnelRunsAs() async throws {
        let appliance = try Appliance()
        // Group busymate, so that it can still reach control.sock and the store.
        appliance.supervisorArguments = ["--tunnel-user", "nobody", "--tunnel-group", "busymate"]
        try appliance.start()
        let pid = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: pid) == "\(PrivilegeDrop.lookupUser("nobody") ?? 0)")
        let bad = try Command.run(
            Command.binary("busymate-app"), ["--tunnel-user", "-x", "--group", appliance.base.appendingPathComponent("other").path])
        #expect(bad.status == 64 && bad.stderr.contains("--tunnel-user needs a user or group name"), "\(bad.stderr)")
    }

    @Test func aTruncatedCAKeyIsReportedWithoutQuotingIt() async throws {
        let appliance = try Appliance()
        try appliance.start()
        appliance.stop()
        // Keep the PEM header and most of the key: what a parser would quote.
        let keyURL = appliance.group.appendingPathComponent("ca.key")
        let key = try String(contentsOf: keyURL, encoding: .utf8)
        let truncated = String(key.prefix(key.count - 40))
        try Data(truncated.utf8).write(to: keyURL)
        // Every 12-character piece of the key's base64 body: none may show.
        let body = truncated.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let pieces = stride(from: 0, to: body.count - 12, by: 6).map { String(body.dropFirst($0).prefix(12)) }
        #expect(pieces.count > 10)
        try appliance.start()
        try waitUntil("status says the CA is not usable", timeout: 5) {
            (try appliance.status().string("tunnel.interception") ?? "").hasPrefix("off")
        }
        let statusText = try appliance.cli(["status"]).stdout
        let statusJSON = try appliance.cli(["status", "--json"]).stdout
        let statusFile = (try? String(contentsOf: appliance.group.appendingPathComponent("status.json"), encoding: .utf8)) ?? ""
        #expect(statusText.contains("ca.key is not a PEM"), "\(statusText)")
        for (name, text) in [
            ("status", statusText), ("status --json", statusJSON), ("status.json", statusFile), ("the log", appliance.log),
        ] {
            let leaked = pieces.filter { text.contains($0) }
            #expect(leaked.isEmpty, "\(name) quotes the key: \(leaked.prefix(3))")
        }
    }

    @Test(.enabled(if: geteuid() == 0, "the symlink's target must be root's"))
    func theRootCLINeverFollowsAPlantedStoreSymlink() async throws {
        let appliance = try Appliance()
        try FileManager.default.createDirectory(at: appliance.group, withIntermediateDirectories: true)
        // A root-only file a group member points capture.sqlite at.
        let victim = appliance.base.appendingPathComponent("victim.db")
        try Data("root's own file\n".utf8).write(to: victim)
        chmod(victim.path, 0o600)
        symlink(victim.path, appliance.group.appendingPathComponent("capture.sqlite").path)
        for args in [["list"], ["pinned", "remove", "example.com"], ["breakpoints", "list"]] {
            let r = try appliance.cli(args)
            #expect(r.status != 0, "\(args)")
            #expect(r.stderr.contains("not a regular file"), "\(args): \(r.stderr)")
        }
        var st = stat()
        #expect(stat(victim.path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "root's own file\n")
        #expect(!FileManager.default.fileExists(atPath: victim.path + "-wal"))
    }

    /// What a group member does to the store: rewrite one row.
    private func setColumn(_ appliance: Appliance, id: Int, _ column: String, to value: String) throws {
        let script =
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('update exchanges set %s=? where id=?' % sys.argv[2], (sys.argv[3], int(sys.argv[4]))); c.commit()"
        let r = try Command.run(
            "/usr/bin/env",
            ["python3", "-c", script, appliance.group.appendingPathComponent("capture.sqlite").path, column, value, "\(id)"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test(.enabled(if: geteuid() == 0, "the secret must be root's"))
    func theRootCLIReadsNoBodyFileARowPointsOutsideBodies() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        #expect(
            try Command.curl(
                proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/echo-body", extra: ["--data-binary", "hello"]
            ).code == 200)
        let rows = try appliance.rows("the exchange", until: { $0.count == 1 })
        let id = try #require(rows.first?["id"] as? Int)
        let secret = appliance.base.appendingPathComponent("rootsecret")
        try Data("TOPSECRET-4711\n".utf8).write(to: secret)
        chmod(secret.path, 0o600)
        let bodies = appliance.group.appendingPathComponent("bodies")
        // Only a file's owner may remove or replace it there: the tunnel's body files are the tunnel's.
        var st = stat()
        #expect(stat(bodies.path, &st) == 0 && st.st_mode & 0o7777 == 0o3770, "bodies/ is \(String(st.st_mode & 0o7777, radix: 8))")
        symlink(secret.path, bodies.appendingPathComponent("planted.request").path)
        // A hard link too (where fs.protected_hardlinks lets one be made of a file one can read and write).
        let linked = appliance.base.appendingPathComponent("linkable")
        try Data("TOPSECRET-LINKED\n".utf8).write(to: linked)
        #expect(link(linked.path, bodies.appendingPathComponent("linked.request").path) == 0)
        let relative = "../../" + secret.lastPathComponent
        for (planted, why) in [
            (relative, "is not a file name"), ("planted.request", "symbolic link"), (secret.path, "is not a file name"),
            ("linked.request", "a hard link"),
        ] {
            try setColumn(appliance, id: id, "request_body_file", to: planted)
            for args in [
                ["show", "\(id)", "--body", "request", "--no-pager"], ["show", "\(id)", "--save-body", "request", "-"],
                ["curl", "\(id)"], ["resend", "\(id)"], ["show", "\(id)", "--json"],
            ] {
                let r = try appliance.cli(args)
                #expect(!r.stdout.contains("TOPSECRET") && !r.stderr.contains("TOPSECRET"), "\(planted) \(args): the secret was printed")
                #expect(r.status != 0, "\(planted) \(args): \(r.stdout)")
                #expect(
                    r.stderr.contains("exchange \(id)'s request body file") && r.stderr.contains(why), "\(planted) \(args): \(r.stderr)")
            }
            // A body search cannot probe the file either.
            let search = try appliance.cli(["list", "~bq TOPSECRET", "--json"])
            #expect(search.status == 0 && !search.stdout.contains("\"id\""), "\(planted): \(search.stdout)")
        }
        // Nothing was resent: the one exchange is still the only one.
        #expect(try appliance.rows().count == 1)
        // Retention and clear remove by the row's name too: a name that leaves bodies/ removes nothing.
        #expect(FileManager.default.fileExists(atPath: secret.path))
    }

    @Test(.enabled(if: geteuid() == 0, "root posting is the hole"))
    func rootPostsNoNotificationThroughAPlantedLink() async throws {
        let appliance = try Appliance()
        try appliance.start()
        // Someone else's datagram socket, outside the group, and a link to it planted in notify/.
        let victimPath = appliance.base.appendingPathComponent("victim.sock").path
        let victim = try UnixSocket.bind(path: victimPath, type: Int32(SOCK_DGRAM.rawValue), mode: 0o600)
        defer { victim.close() }
        let notify = appliance.group.appendingPathComponent("notify")
        symlink(victimPath, notify.appendingPathComponent("planted-1.sock").path)
        // A hard link of it too (same file system): a socket file with two names is not a peer's.
        link(victimPath, notify.appendingPathComponent("planted-2.sock").path)
        var st = stat()
        #expect(stat(notify.path, &st) == 0 && st.st_mode & 0o7777 == 0o3770, "notify/ is \(String(st.st_mode & 0o7777, radix: 8))")
        // Root's CLI edits settings (it posts settingsDidChange), and the supervisor posts as it reloads.
        #expect(try appliance.cli(["ssl-proxying", "add", "planted.example"]).status == 0)
        #expect(try appliance.cli(["ssl-proxying", "remove", "planted.example"]).status == 0)
        try await Task.sleep(for: .milliseconds(500))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let received = recv(victim.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        #expect(received < 0, "root sent \(received) bytes to a socket a link in notify/ pointed at")
        // Real peers are still told: the tunnel took the new list.
        #expect(appliance.log.contains("not posting to a file in notify/"), "\(appliance.log.suffix(2000))")
    }

    @Test(.enabled(if: geteuid() == 0, "binding a port below 1024 needs root"))
    func settingsJSONCannotOpenAPrivilegedPort() async throws {
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0", "127.0.0.1:81"]}, "tunnel": {"drain_seconds": 2}}

                """)
        try appliance.start()
        try waitUntil("status reports the refused listener", timeout: 5) {
            (try appliance.cli(["status"]).stdout).contains("--privileged-port 81")
        }
        let curl = try Command.run("/usr/bin/curl", ["-sS", "--max-time", "2", "http://127.0.0.1:81/"])
        #expect(curl.status != 0, "something answers on port 81: \(curl.stdout)")
        // The web page and onboarding neither.
        try appliance.writeSettings(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2},
             "web": {"listen": "127.0.0.1:82"}, "onboarding": {"listen": "127.0.0.1:83"}}

            """)
        try waitUntil("status reports the refused web listeners", timeout: 10) {
            let text = try appliance.cli(["status"]).stdout
            return text.contains("--privileged-port 82") && text.contains("--privileged-port 83")
        }
        for port in [82, 83] {
            #expect(
                try Command.run("/usr/bin/curl", ["-sS", "--max-time", "2", "http://127.0.0.1:\(port)/"]).status != 0,
                "port \(port) answers")
        }
        appliance.stop()
        // Root's own opt-in on the supervisor's command line opens it.
        try appliance.writeSettings(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0", "127.0.0.1:81"]}, "tunnel": {"drain_seconds": 2}}

            """)
        appliance.supervisorArguments = ["--privileged-port", "81"]
        try appliance.start()
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        try waitUntil("port 81 proxies", timeout: 5) {
            (try? Command.curl(proxyPort: 81, "http://127.0.0.1:\(origin.port)/ok").code) == 200
        }
    }

    @Test func secretsStayOutOfWorldReadableFiles() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2},
                 "upstream_proxy": {"host": "127.0.0.1", "port": 9, "username": "u", "password": "hunter2", "bypass": ["127.0.0.1"]}}

                """)
        try appliance.start()
        func mode(_ url: URL) -> mode_t {
            var st = stat()
            stat(url.path, &st)
            return st.st_mode & 0o777
        }
        #expect(
            mode(appliance.settingsURL) & 0o007 == 0, "settings.json with a password is \(String(mode(appliance.settingsURL), radix: 8))")
        // An editor's save brings 0664 back; the supervisor takes it away again.
        let text = try String(contentsOf: appliance.settingsURL, encoding: .utf8).replacingOccurrences(of: "\"debug\"", with: "\"info\"")
        try AtomicFile.write(Data(text.utf8), to: appliance.settingsURL, mode: 0o664)
        try waitUntil("settings.json is not world-readable again", timeout: 3) { mode(appliance.settingsURL) & 0o007 == 0 }

        let port = try appliance.proxyPort
        let sent = try Command.curl(
            proxyPort: port, "http://127.0.0.1:\(origin.port)/secret",
            extra: ["-H", "Authorization: Bearer tok3n", "-H", "Cookie: session=c00kie"])
        #expect(sent.code == 200)
        try waitUntil("the exchange is stored", timeout: 3) { try appliance.rows().count == 1 }
        let har = appliance.base.appendingPathComponent("plain.har")
        #expect(try appliance.cli(["export", "--har", har.path]).status == 0)
        #expect(mode(har) == 0o600)
        let plain = try String(contentsOf: har, encoding: .utf8)
        #expect(plain.contains("tok3n") && plain.contains("c00kie"))
        let redactedHAR = appliance.base.appendingPathComponent("redacted.har")
        #expect(try appliance.cli(["export", "--har", redactedHAR.path, "--redact", "--mode", "644"]).status == 0)
        #expect(mode(redactedHAR) == 0o644)
        let redacted = try String(contentsOf: redactedHAR, encoding: .utf8)
        #expect(!redacted.contains("tok3n") && !redacted.contains("c00kie") && redacted.contains("[redacted]"))
        #expect(redacted.contains("/secret"))
    }

    @Test(.enabled(if: geteuid() == 0, "switching to another user needs root"))
    func aUserOutsideTheGroupReadsNoSecret() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2},
                 "upstream_proxy": {"host": "127.0.0.1", "port": 9, "username": "u", "password": "hunter2", "bypass": ["127.0.0.1"]}}

                """)
        try appliance.start()
        // A body large enough for a file of its own, so bodies/ is tried too.
        let upload = appliance.base.appendingPathComponent("upload.bin")
        try Data(repeating: 0x41, count: 64 << 10).write(to: upload)
        chmod(upload.path, 0o644)
        #expect(
            try Command.curl(
                proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/echo-body",
                extra: ["--data-binary", "@" + upload.path]
            ).code == 200)
        try waitUntil("the exchange is stored", timeout: 3) { try appliance.rows().count == 1 }
        let bodyFiles = try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("bodies").path)
        #expect(!bodyFiles.isEmpty)
        // nobody: neither root nor in group busymate.
        func asNobody(_ args: [String]) throws -> CommandResult {
            try Command.run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] + args)
        }
        var secrets = ["ca.key", "capture.sqlite", "capture.sqlite-wal", "settings.json"].map {
            appliance.group.appendingPathComponent($0).path
        }
        secrets += bodyFiles.map { appliance.group.appendingPathComponent("bodies").appendingPathComponent($0).path }
        for path in secrets where FileManager.default.fileExists(atPath: path) {
            let r = try asNobody(["/bin/cat", path])
            #expect(r.status != 0 && r.stdout.isEmpty, "nobody read \(path)")
        }
        // ca.pem is public (devices install it); the CLI's store commands are refused.
        #expect(try asNobody(["/bin/cat", appliance.caFile.path]).status == 0)
        let list = try asNobody([Command.binary("busymate"), "list", "--group", appliance.group.path])
        #expect(list.status != 0)
        let restart = try asNobody([Command.binary("busymate"), "tunnel", "restart", "--group", appliance.group.path])
        #expect(restart.status != 0 && restart.stderr.contains("permission denied"), "\(restart.stderr)")
    }

    /// What a process with these ids can open (`rw:` asks for writing) and
    /// whether it can signal `pid`: errno names, or "ok".
    private func probe(uid: String, gid: String, groups: String, signalling pid: Int32, _ paths: [String]) throws -> [String: String] {
        let script = """
            import errno, json, os, sys
            out = {}
            def attempt(name, f):
                try:
                    f()
                    out[name] = "ok"
                except OSError as e:
                    out[name] = errno.errorcode.get(e.errno, str(e.errno))
            for p in sys.argv[2:]:
                flags = os.O_RDWR if p.startswith("rw:") else os.O_RDONLY
                attempt(p, lambda p=p, flags=flags: os.close(os.open(p.removeprefix("rw:"), flags)))
            attempt("kill", lambda: os.kill(int(sys.argv[1]), 0))
            print(json.dumps(out))
            """
        let ids = ["--reuid=\(uid)", "--regid=\(gid)"] + (groups.isEmpty ? ["--clear-groups"] : ["--groups=\(groups)"])
        let r = try Command.run("/usr/bin/setpriv", ids + ["--", "/usr/bin/python3", "-c", script, "\(pid)"] + paths)
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: String] ?? [:]
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func theWebFrontCannotReadTheTunnelsSecretsNorSignalIt() async throws {
        let appliance = try Appliance()
        // The device token mirror, as the supervisor wrote it so far (0640 root:busymate).
        let mirror = appliance.group.appendingPathComponent("device-jwt.json")
        try Data(#"{"token": "mirror-secret"}"#.utf8).write(to: mirror)
        chmod(mirror.path, 0o640)
        chown(mirror.path, 0, PrivilegeDrop.lookupGroup("busymate") ?? 0)
        // The onboarding log a web front running as the tunnel's user left: in
        // the sticky directory only its owner may replace it.
        let onboarding = appliance.group.appendingPathComponent("onboarding.json")
        try Data("{}".utf8).write(to: onboarding)
        chown(onboarding.path, PrivilegeDrop.lookupUser("busymate") ?? 0, PrivilegeDrop.lookupGroup("busymate") ?? 0)
        try appliance.start()
        try waitUntil("the tunnel and the web front are ready", timeout: 10) {
            let s = try appliance.status()
            return s.string("tunnel.state") == "ready" && s.string("web.state") == "ready"
        }
        let status = try appliance.status()
        let web = ProcessProbe.status(Int32(try #require(status.int("web.pid"))))
        let tunnelPID = Int32(try #require(status.int("tunnel.pid")))
        let tunnel = ProcessProbe.status(tunnelPID)
        func first(_ field: String?) -> String { field?.split(whereSeparator: { $0 == "\t" || $0 == " " }).first.map(String.init) ?? "" }
        func groups(_ field: String?) -> String { (field ?? "").split(whereSeparator: { $0 == "\t" || $0 == " " }).joined(separator: ",") }
        #expect(first(web["Uid"]) == "\(PrivilegeDrop.lookupUser(TunnelIdentity.defaultWebUser) ?? 0)", "\(web["Uid"] ?? "")")
        #expect(first(web["Uid"]) != first(tunnel["Uid"]))
        #expect(first(web["Gid"]) == "\(PrivilegeDrop.lookupGroup("busymate") ?? 0)")
        #expect(status.string("tunnel.interception") == "on")
        var st = stat()
        #expect(stat(onboarding.path, &st) == 0 && "\(st.st_uid)" == first(web["Uid"]), "onboarding.json is uid \(st.st_uid)'s")

        let group = appliance.group
        let key = group.appendingPathComponent("ca.key").path
        let privateDirectory = appliance.base.appendingPathComponent("private").path
        let store = group.appendingPathComponent("capture.sqlite").path
        let shared = [
            group.appendingPathComponent("web-token").path, appliance.caFile.path, "rw:" + store, "rw:" + store + "-shm",
            "rw:" + group.appendingPathComponent("settings.json").path,
        ]
        // As the web front: the page's files, never the tunnel's secrets nor the tunnel.
        let asWeb = try probe(
            uid: first(web["Uid"]), gid: first(web["Gid"]), groups: groups(web["Groups"]), signalling: tunnelPID,
            [key, mirror.path, privateDirectory] + shared)
        #expect(asWeb[key] == "EACCES" && asWeb[mirror.path] == "EACCES" && asWeb[privateDirectory] == "EACCES", "\(asWeb)")
        #expect(asWeb["kill"] == "EPERM", "\(asWeb)")
        for path in shared { #expect(asWeb[path] == "ok", "the web front cannot open \(path): \(asWeb)") }
        // As the tunnel: its secrets still, the private directory never.
        let asTunnel = try probe(
            uid: first(tunnel["Uid"]), gid: first(tunnel["Gid"]), groups: groups(tunnel["Groups"]), signalling: tunnelPID,
            [key, mirror.path, privateDirectory])
        #expect(asTunnel[key] == "ok" && asTunnel[mirror.path] == "ok" && asTunnel[privateDirectory] == "EACCES", "\(asTunnel)")

        // The page still works end to end as that user: it edits settings.json.
        let url = try appliance.cli(["web", "url"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let jar = appliance.base.appendingPathComponent("cookies").path
        let login = try Command.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-L", "-c", jar, url])
        #expect(login.stdout == "200")
        let base = try appliance.webBase
        let put = try Command.run(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, "-X", "PUT", "-H", "Origin: \(base)",
                "-H", "Content-Type: application/json", "--data", #"{"include": ["example.org"], "exclude": []}"#,
                base + "/api/settings/ssl-proxying",
            ])
        #expect(put.stdout == "200", "\(put.stdout) \(put.stderr)")
        #expect(try String(contentsOf: appliance.settingsURL, encoding: .utf8).contains("example.org"))
        // The unit's command line cannot put the web front back under the tunnel's uid.
        let same = try Command.run(
            Command.binary("busymate-app"), ["--web-user", "busymate", "--group", appliance.base.appendingPathComponent("other").path])
        #expect(same.status == 64 && same.stderr.contains("--web-user must not be the tunnel's user"), "\(same.stderr)")
    }

    @Test func aListenerOffLoopbackWithNoAccessListIsWarnedAbout() async throws {
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0", "0.0.0.0:0"]}, "tunnel": {"drain_seconds": 2}}

                """)
        try appliance.start()
        let listeners = try appliance.status().array("listeners")
        #expect(listeners.count == 2)
        #expect(listeners.first { $0["address"] as? String == "127.0.0.1:0" }?["warning"] as? String == nil)
        #expect(
            (listeners.first { $0["address"] as? String == "0.0.0.0:0" }?["warning"] as? String)?.contains("access.allow is empty") == true)
        #expect(try appliance.cli(["status"]).stdout.contains("⚠ exposed      0.0.0.0:0 is not on loopback and access.allow is empty"))
        #expect(appliance.log.contains("0.0.0.0:0 is not on loopback and access.allow is empty"), "\(appliance.log)")
        // This machine's own clients still get in on the wildcard listener.
        let bound = try #require(listeners.first { $0["address"] as? String == "0.0.0.0:0" }?["bound"] as? String)
        let port = try #require(bound.split(separator: ":").last.flatMap { Int($0) })
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/local").code == 200)

        // With the network listed, no warning.
        try appliance.writeSettings(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0", "0.0.0.0:0"]}, "tunnel": {"drain_seconds": 2}, "access": {"allow": ["192.168.0.0/16"]}}

            """)
        try waitUntil("the warning is gone", timeout: 10) {
            (try? appliance.status().array("listeners"))?.allSatisfy { $0["warning"] as? String == nil } == true
        }
    }
}
