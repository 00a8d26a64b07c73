import ArgumentParser
import BusymateShared
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import ProxyEngine

/// `make bench`: the system under test alone on core 0 (nginx for the
/// direct cells; Busymate or mitmdump, one at a time, for the others), this
/// load generator on core 1, and nginx beside it while a proxy is measured:
/// the origin stands for a remote server, not for the proxy's competition.
@main
struct BusymateBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "busymate-bench", abstract: "Busymate against mitmdump and the direct path, on loopback.")

    @Option(help: "Seconds each scenario is measured (after a one-second warm-up).") var seconds = 5.0
    @Option(help: "Concurrent keep-alive connections.") var connections = 32
    @Option(help: "Concurrent clients opening a new connection per request.") var newConnectionClients = 8
    @Option(help: "Concurrent HTTP/2 connections in the HTTP/2 cells (each with 10 or 100 streams at once).") var http2Connections = 8
    @Option(help: "The release binaries (`make bench` builds them in bench/).") var binaries = "bench/.build/release"
    @Option(help: "mitmdump 12.3.1, or empty to measure Busymate against direct only.") var mitmdump = ""
    @Option(help: "Why mitmdump is missing, for the report.") var mitmdumpMissing = ""
    @Option(help: "Where the report goes.") var output = "BENCHMARKS.md"
    @Option(help: "The core the system under test runs on; the generator and, behind a proxy, the origin run on the other.")
    var serverCore = 0
    var otherCore: Int { serverCore == 0 ? 1 : 0 }
    @Option(
        help:
            "Only the scenarios whose name contains this (`HTTP/2` adds the HTTP/2 memory cell), or `store`, `memory`, `web`, `settings` or `cloud` alone (for profiling)."
    ) var only = ""
    @Flag(help: "Skip the direct path (for profiling).") var skipDirect = false
    @Option(help: "Rows in the store for the `busymate list` check.") var storeRows = 1_000_000
    @Option(help: "Build the store's group here and keep it (for profiling queries).") var keepStore = ""
    @Option(name: .customLong("websocket-window"), help: "Messages in flight on each connection in the WebSocket cell.")
    var webSocketWindow = 10
    @Option(name: .customLong("serve-websocket-origin"), help: .hidden) var serveWebSocketOrigin = 0
    @Option(help: .hidden) var originCertificate = ""
    @Option(help: .hidden) var originKey = ""

    func validate() throws {
        guard webSocketWindow >= 1 else { throw ValidationError("--websocket-window must be at least 1") }
    }

    func run() async throws {
        if serveWebSocketOrigin > 0 {
            return try await WebSocketOrigin.serve(port: serveWebSocketOrigin, certificate: originCertificate, key: originKey)
        }
        let work = URL(fileURLWithPath: "/tmp/busymate-bench-\(getpid())")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

        let origin = try NginxOrigin.start(in: work.appendingPathComponent("origin"), core: serverCore)
        defer { origin.process.stop() }
        var report = Report(connections: connections, seconds: seconds)
        report.http2Connections = http2Connections
        report.webSocketWindow = webSocketWindow
        report.notes.append(
            mitmdump.isEmpty
                ? "mitmdump: not measured (\(mitmdumpMissing.isEmpty ? "not installed" : mitmdumpMissing))" : "mitmdump: \(mitmdump)")

        var scenarios = Scenario.all(
            origin: origin, connections: connections, newConnectionClients: newConnectionClients, http2Connections: http2Connections
        )
        .filter { only.isEmpty || $0.name.contains(only) }
        var webSocketOrigin: WebSocketOrigin?
        defer { webSocketOrigin?.process.stop() }
        if only.isEmpty || Scenario.webSocketName(window: webSocketWindow).contains(only) {
            let echo = try WebSocketOrigin.start(in: work.appendingPathComponent("origin"), core: serverCore, origin: origin)
            webSocketOrigin = echo
            scenarios.append(.webSocket(echo, connections: connections, window: webSocketWindow))
        }
        if !skipDirect {
            log("direct")
            for scenario in scenarios {
                report.record(scenario.name, .direct, try await measure(scenario, through: nil, origin: origin, group: group))
                if scenario.isHTTP2, let checked = try H2Load.run(scenario.plan, seconds: seconds) {
                    log(
                        "  \(scenario.name): h2load \(Int(checked.perSecond)) req/s over \(checked.applicationProtocol), \(checked.succeeded) succeeded, \(checked.failed) failed"
                    )
                    report.h2load[scenario.name] = checked
                }
            }
        }
        var proxies: [(Report.Column, () throws -> ProxyUnderTest)] = [
            (
                .busymate,
                {
                    try Busymate.start(
                        binaries: URL(fileURLWithPath: binaries), in: work.appendingPathComponent("busymate"), core: serverCore,
                        origin: origin)
                }
            )
        ]
        if !mitmdump.isEmpty {
            proxies.append(
                (
                    .mitmdump,
                    {
                        try Mitmdump.start(
                            executable: mitmdump, in: work.appendingPathComponent("mitmdump"), core: serverCore, origin: origin)
                    }
                ))
        }
        for (column, start) in proxies {
            let proxy = try start()
            defer { proxy.process.stop() }
            let fresh = MemoryBench.rss(proxy.dataPathPID)
            log(proxy.name)
            for scenario in scenarios {
                report.record(scenario.name, column, try await measure(scenario, through: proxy, origin: origin, group: group))
                let messages = scenario.isWebSocket ? proxy.messagesStored().map { ", \($0) WebSocket messages stored" } ?? "" : ""
                log(
                    "  \(scenario.name): \(proxy.name)'s RSS now \(MemoryBench.rss(proxy.dataPathPID) / 1024) MB\(proxy.rowsStored().map { ", \($0) exchanges stored" } ?? "")\(messages)"
                )
            }
            if wants("memory") {
                let idle = MemoryBench.rss(proxy.dataPathPID)
                let crowd = try await thousandConnections(proxy, origin: origin, group: group)
                report.thousandMITM[column] = crowd
                if column == .busymate {
                    report.memory = try await memory(proxy, fresh: fresh, idle: idle, crowd: crowd, origin: origin, group: group)
                }
            }
            if only.isEmpty || only == "memory" || only.contains("HTTP/2") {
                report.http2Memory[column] = try await http2Memory(proxy, origin: origin, group: group)
            }
            if column == .busymate && (only.isEmpty || only == "web") {
                log("web: a row from the proxy to an open page")
                report.webLive = try await WebBench.live(proxy, origin: origin)
            }
        }
        if wants("every core") || wants("page") { try await everyCore(&report, origin: origin) }
        if only.isEmpty || only == "settings" {
            report.settingsCost = try await settingsCost(origin: origin, group: group)
            report.breakpointCheck = try BreakpointCheckBench.run(in: work)
        }
        if only.isEmpty || only == "store" {
            log("store: \(storeRows) rows")
            let directory = keepStore.isEmpty ? work : URL(fileURLWithPath: keepStore)
            report.store = try await StoreBench.run(binaries: URL(fileURLWithPath: binaries), in: directory, rows: storeRows)
            log("web: pages through the API over \(storeRows) rows")
            report.webPages = try await WebBench.pages(group: directory.appendingPathComponent("store-group"), rows: storeRows)
        }
        if only.isEmpty || only == "cloud" {
            log("cloud: the sinks")
            do {
                report.cloud = try await cloud(origin: origin, group: group)
            } catch {
                // The sinks' cells are the cloud's, not the whole run's.
                log("cloud: not measured: \(error)")
                report.cloud = CloudBench.Result(notes: ["not measured: \(error)"])
            }
        }
        report.mint = try mintTimes()
        report.openExchanges = OpenExchangesBench.nanosecondsPerExchange()
        let table = report.render()
        FileHandle.standardOutput.write(Data((table + "\n").utf8))
        try report.write(to: URL(fileURLWithPath: output))
        try await group.shutdownGracefully()
    }

    /// Whether `--only` asks for the cell named `name` alone, or for everything.
    private func wants(_ name: String) -> Bool { only.isEmpty || only == name }

    /// Chromium, the origin and the proxy all on every core, as on a user's machine.
    /// A failed load is the cell's, said in the report, not the whole run's.
    private func pageLoad(_ column: Report.Column, through proxy: ProxyUnderTest?, origin: NginxOrigin, into report: inout Report) {
        let name = proxy?.name ?? "direct"
        do {
            let result = try PageLoadBench.measure(origin: origin, proxyPort: proxy?.port)
            report.pageLoad[column] = result
            log(
                "  page load (\(name)): median \(String(format: "%.0f", result.medianMilliseconds)) ms over \(result.loads.count) loads, \(result.resources) resources, \(result.protocols.joined(separator: "/"))"
            )
        } catch {
            report.pageLoadFailures[column] = "\(error)"
            report.notes.append("page load (\(name)): not measured: \(error)")
            log("  page load (\(name)) failed: \(error)")
        }
    }

    /// The MITM keep-alive cells and the browser's page load as on a user's
    /// machine: every process may use every core (Busymate an event loop per
    /// core, mitmdump its one thread), the generator with a thread per core too.
    private func everyCore(_ report: inout Report, origin: NginxOrigin) async throws {
        let all = BenchProcess.everyCore
        try BenchProcess.pin(getpid(), to: all, name: "the generator")
        defer { try? BenchProcess.pin(getpid(), to: "\(otherCore)", name: "the generator") }
        try BenchProcess.pin(origin.process.pid, to: all, name: "nginx")
        defer { try? origin.pin(to: otherCore) }
        let wide = MultiThreadedEventLoopGroup(numberOfThreads: ProcessInfo.processInfo.processorCount)
        do {
            try await everyCore(&report, origin: origin, group: wide, cores: all)
            try await wide.shutdownGracefully()
        } catch {
            try? await wide.shutdownGracefully()
            throw error
        }
    }

    private func everyCore(_ report: inout Report, origin: NginxOrigin, group wide: EventLoopGroup, cores all: String) async throws {
        let scenarios = Scenario.all(
            origin: origin, connections: connections, newConnectionClients: newConnectionClients, http2Connections: http2Connections
        )
        .filter { $0.name == "MITM HTTPS keep-alive 1 KiB" || $0.name.hasSuffix("100 streams per connection") }
        .map { Scenario(name: Scenario.everyCorePrefix + $0.name, plan: $0.plan) }
        .filter { _ in wants("every core") }
        log("every core: direct")
        for scenario in scenarios {
            report.record(scenario.name, .direct, try await measure(scenario, through: nil, origin: origin, group: wide, pinning: false))
        }
        if wants("page") { pageLoad(.direct, through: nil, origin: origin, into: &report) }
        var proxies: [(Report.Column, () throws -> ProxyUnderTest)] = [
            (
                .busymate,
                {
                    try Busymate.start(
                        binaries: URL(fileURLWithPath: binaries), in: URL(fileURLWithPath: "/tmp/busymate-bench-\(getpid())/every-core"),
                        cores: all, origin: origin)
                }
            )
        ]
        if !mitmdump.isEmpty {
            proxies.append(
                (
                    .mitmdump,
                    {
                        try Mitmdump.start(
                            executable: mitmdump, in: URL(fileURLWithPath: "/tmp/busymate-bench-\(getpid())/every-core-mitmdump"),
                            cores: all, origin: origin)
                    }
                ))
        }
        for (column, start) in proxies {
            let proxy = try start()
            defer { proxy.process.stop() }
            log("every core: \(proxy.name)")
            for scenario in scenarios {
                report.record(
                    scenario.name, column, try await measure(scenario, through: proxy, origin: origin, group: wide, pinning: false))
            }
            if wants("page") { pageLoad(column, through: proxy, origin: origin, into: &report) }
        }
    }

    private func measure(
        _ scenario: Scenario, through proxy: ProxyUnderTest?, origin: NginxOrigin, group: EventLoopGroup,
        seconds: Double? = nil, pinning: Bool = true
    ) async throws -> LoadResult {
        if pinning { try (scenario.origin ?? origin.process).pin(to: proxy == nil ? serverCore : otherCore) }
        var trust = [origin.certificate.path]
        if let proxy { trust.append(proxy.caCertificate.path) }
        var config = TLSConfiguration.makeClientConfiguration()
        config.curves = Self.curlCurves
        config.trustRoots = .certificates(try trust.flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        config.applicationProtocols = scenario.isHTTP2 ? ["h2"] : ["http/1.1"]
        var plan = scenario.plan
        plan.proxy = proxy.map { ("127.0.0.1", $0.port) }
        plan.tls = plan.https ? try NIOSSLContext(configuration: config) : nil
        var warmUp = plan
        warmUp.duration = .seconds(1)
        _ = try await LoadGenerator.run(warmUp, group: group)
        plan.duration = .milliseconds(Int64((seconds ?? self.seconds) * 1000))
        let before = CoreLoad.read()
        let cpuBefore = proxy.map { ProcessCPU.seconds($0.dataPathPID) }
        var result = try await LoadGenerator.run(plan, group: group)
        let after = CoreLoad.read()
        if let proxy, let cpuBefore { result.proxyCPU = ProcessCPU.seconds(proxy.dataPathPID) - cpuBefore }
        result.serverCore = after.busy(serverCore, since: before)
        result.generatorCore = after.busy(otherCore, since: before)
        log("  \(scenario.name): cores busy: servers \(Int(result.serverCore * 100)) %, generator \(Int(result.generatorCore * 100)) %")
        let unit = scenario.isWebSocket ? "msg" : "req"
        log(
            "  \(scenario.name): \(Int(result.perSecond)) \(unit)/s, \(String(format: "%.1f", result.megabytesPerSecond)) MB/s, p50 \(String(format: "%.2f", result.percentile(0.5))) ms, p99 \(String(format: "%.2f", result.percentile(0.99))) ms, \(result.failures) failed\(result.firstError.map { " (\($0))" } ?? "")\(result.proxyCPUPerRequest.isNaN ? "" : String(format: ", proxy CPU %.1f µs/\(unit)", result.proxyCPUPerRequest))"
        )
        return result
    }

    /// The keep-alive cells under each of `SettingsCostBench.variants`, round
    /// after round, on a Busymate of their own whose group (the store) is on
    /// tmpfs: this compares CPU work, and the disk's noise would drown it.
    private func settingsCost(origin: NginxOrigin, group: EventLoopGroup) async throws -> SettingsCostBench.Result {
        let directory = URL(fileURLWithPath: "/dev/shm/busymate-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let proxy = try Busymate.start(binaries: URL(fileURLWithPath: binaries), in: directory, core: serverCore, origin: origin)
        defer { proxy.process.stop() }
        guard let paths = proxy.group else { throw BenchError("Busymate has no group") }
        let cells = Scenario.all(
            origin: origin, connections: connections, newConnectionClients: newConnectionClients, http2Connections: http2Connections
        )
        .filter { $0.name.contains("keep-alive 1 KiB") && !$0.name.contains("passthrough") && !$0.isHTTP2 }
        var result = SettingsCostBench.Result()
        for round in 0..<SettingsCostBench.rounds {
            for variant in SettingsCostBench.variants {
                try SettingsCostBench.apply(variant, group: paths, origin: origin)
                log("settings, round \(round + 1): \(variant.label)")
                for scenario in cells {
                    result.cells.append(
                        .init(
                            round: round, variant: variant.label, scenario: scenario.name,
                            result: try await measure(
                                scenario, through: proxy, origin: origin, group: group, seconds: SettingsCostBench.seconds)))
                }
            }
        }
        try SettingsCostBench.apply(SettingsCostBench.none, group: paths, origin: origin)
        return result
    }

    /// `CloudBench`: the keep-alive cells unpaired and paired in turns, on
    /// a Busymate whose store is on tmpfs (as the settings cells), then
    /// each sink draining a backlog.
    private func cloud(origin: NginxOrigin, group: EventLoopGroup) async throws -> CloudBench.Result {
        var result = CloudBench.Result()
        guard geteuid() == 0 else {
            result.notes.append("not measured: pairing is root's (run make bench as root)")
            return result
        }
        let double = try CloudBench.Server(core: otherCore)
        defer { double.stop() }
        let directory = URL(fileURLWithPath: "/dev/shm/busymate-bench-cloud-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let proxy = try Busymate.start(binaries: URL(fileURLWithPath: binaries), in: directory, core: serverCore, origin: origin)
        defer { proxy.process.stop() }
        guard let paths = proxy.group else { throw BenchError("Busymate has no group") }
        let tools = URL(fileURLWithPath: binaries)
        let cells = Scenario.all(
            origin: origin, connections: connections, newConnectionClients: newConnectionClients, http2Connections: http2Connections
        )
        .filter { $0.name.contains("keep-alive 1 KiB") && !$0.name.contains("passthrough") && !$0.isHTTP2 }
        for round in 0..<CloudBench.rounds {
            // Turns alternate which goes first, so neither always runs on a warmer tunnel and a bigger store.
            for on in round % 2 == 0 ? [false, true] : [true, false] {
                if on { try CloudBench.pair(tools, double, paths) }
                log("cloud, round \(round + 1): sink \(on ? "on" : "off")")
                for scenario in cells {
                    let measured = try await measure(scenario, through: proxy, origin: origin, group: group)
                    result.cells.append(
                        .init(
                            round: round, sinkOn: on, scenario: scenario.name, result: measured,
                            backlog: on ? CloudBench.sink("postgrest", paths)?.backlog : nil))
                }
                if on {
                    _ = try CloudBench.cli(tools, ["unpair"], group: paths)
                    // The status file is rewritten twice a second: the next pairing must not see this one.
                    try Wait.until("the sink unpaired", seconds: 20) { CloudBench.sink("postgrest", paths) == nil }
                }
            }
        }
        guard let plain = cells.first(where: { $0.name.hasPrefix("plain") }) else { return result }
        let uuid =
            (try? String(contentsOf: directory.appendingPathComponent("private/device-uuid"), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        // The account's sink: a backlog made while the double answers nothing, then drained.
        try CloudBench.pair(tools, double, paths)
        _ = try double.ask("control down")
        _ = try await measure(plain, through: proxy, origin: origin, group: group, seconds: 2)
        let waiting = try CloudBench.backlog("postgrest", paths)
        let already = Int(try double.ask("count \(uuid)")) ?? 0
        _ = try double.ask("control ok")
        log("cloud: draining \(waiting) rows to the PostgREST double")
        result.postgrest = try CloudBench.drain(from: already, to: already + waiting, timeout: 300) {
            Int(try double.ask("count \(uuid)")) ?? 0
        }
        // The team database: a backlog made while it refuses connections, then drained.
        _ = try double.ask("team-connections off")
        _ = try CloudBench.cli(tools, ["cloud", "postgres", "-"], group: paths, input: double.teamURL + "\n")
        try Wait.until("the team sink", seconds: 20) { CloudBench.sink("postgres", paths) != nil }
        _ = try await measure(plain, through: proxy, origin: origin, group: group, seconds: 2)
        let teamRows = try CloudBench.backlog("postgres", paths)
        _ = try double.ask("team-connections on")
        log("cloud: draining \(teamRows) rows to PostgreSQL")
        result.postgres = try CloudBench.drain(from: 0, to: teamRows, timeout: 300) { Int(try double.ask("team-count")) ?? 0 }
        return result
    }

    /// Busymate's tunnel at 1,000 MITM keep-alive connections, and while
    /// one client downloads 1 GiB through it (capture on).
    /// The proxy's data path at 1,000 MITM HTTP/1.1 keep-alive connections, busy for 8 s.
    private func thousandConnections(_ proxy: ProxyUnderTest, origin: NginxOrigin, group: EventLoopGroup) async throws -> MemoryBench.Crowd
    {
        try origin.pin(to: otherCore)
        var config = TLSConfiguration.makeClientConfiguration()
        config.curves = Self.curlCurves
        config.trustRoots = .certificates(
            try [origin.certificate.path, proxy.caCertificate.path].flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        let thousand = LoadPlan(
            https: true, host: "localhost", port: origin.httpsPort, path: "/1k", proxy: ("127.0.0.1", proxy.port),
            connections: 1000, duration: .seconds(8), tls: try NIOSSLContext(configuration: config))
        let crowd = try await MemoryBench.peak(of: proxy.dataPathPID, during: thousand, group: group)
        log(
            "  1,000 connections: \(proxy.name)'s peak RSS \(crowd.kib) KiB, \(Int(crowd.result.perSecond)) req/s, \(crowd.result.failures) failed"
        )
        return MemoryBench.Crowd(kib: crowd.kib, result: crowd.result)
    }

    /// Busymate's tunnel: at start, idle, at 1,000 connections, and while one client streams 1 GiB.
    private func memory(
        _ proxy: ProxyUnderTest, fresh: Int, idle: Int, crowd: MemoryBench.Crowd, origin: NginxOrigin, group: EventLoopGroup
    ) async throws -> MemoryBench.Result {
        let pid = proxy.dataPathPID
        var config = TLSConfiguration.makeClientConfiguration()
        config.curves = Self.curlCurves
        config.trustRoots = .certificates(
            try [origin.certificate.path, proxy.caCertificate.path].flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        let tls = try NIOSSLContext(configuration: config)
        // One request whose response takes as long as it takes.
        let start = MemoryBench.rss(pid)
        let download = LoadPlan(
            https: true, host: "localhost", port: origin.httpsPort, path: "/1g", proxy: ("127.0.0.1", proxy.port),
            connections: 1, duration: .milliseconds(1), tls: tls)
        let streamed = try await MemoryBench.peak(of: pid, during: download, group: group)
        log("  1 GiB download: RSS \(start) KiB before, peak \(streamed.kib) KiB, \(Int(streamed.result.megabytesPerSecond)) MB/s")
        return .init(
            freshKiB: fresh, idleKiB: idle, atThousandKiB: crowd.kib, downloadKiB: (start, streamed.kib),
            downloadMBps: streamed.result.megabytesPerSecond)
    }

    /// The proxy's data path (Busymate's tunnel, mitmdump) at 1,000 MITM
    /// HTTP/2 connections with 10 streams each busy, over 8 s as above.
    private func http2Memory(_ proxy: ProxyUnderTest, origin: NginxOrigin, group: EventLoopGroup) async throws -> MemoryBench.Crowd {
        try origin.pin(to: otherCore)
        var config = TLSConfiguration.makeClientConfiguration()
        config.curves = Self.curlCurves
        config.trustRoots = .certificates(
            try [origin.certificate.path, proxy.caCertificate.path].flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        config.applicationProtocols = ["h2"]
        var plan = LoadPlan(
            https: true, host: "localhost", port: origin.http2Port, path: "/1k", proxy: ("127.0.0.1", proxy.port),
            connections: 1000, duration: .seconds(8), tls: try NIOSSLContext(configuration: config))
        plan.streams = 10
        let crowd = try await MemoryBench.peak(of: proxy.dataPathPID, during: plan, group: group)
        log(
            "  1,000 HTTP/2 connections × 10 streams: \(proxy.name)'s peak RSS \(crowd.kib) KiB, \(Int(crowd.result.perSecond)) req/s, \(crowd.result.failures) failed\(crowd.result.firstError.map { " (\($0))" } ?? "")"
        )
        return MemoryBench.Crowd(kib: crowd.kib, result: crowd.result)
    }

    /// Leaf minting in this process: a fresh CA, 2,000 names past the cache.
    private func mintTimes() throws -> (p50: Double, p99: Double) {
        let ca = try BenchCA.make()
        var times: [Double] = []
        for i in 0..<2000 {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try ca.mintUncached("host\(i).example.com")
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        times.sort()
        return (times[times.count / 2], times[times.count * 99 / 100])
    }

    /// The key-exchange groups Debian 12's curl offers, in its order (OpenSSL
    /// 3.0's defaults, less x448, which BoringSSL lacks). BoringSSL's own list
    /// puts X25519+ML-KEM-768 first, which nginx here cannot speak: the
    /// generator would do a post-quantum handshake through a proxy and a
    /// classic one direct, which is not the same work.
    static let curlCurves: [NIOTLSCurve] = [.x25519, .secp256r1, .secp521r1, .secp384r1]

    private func log(_ line: String) {
        FileHandle.standardError.write(Data(("bench: " + line + "\n").utf8))
    }
}
