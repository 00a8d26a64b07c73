import Foundation

/// The table: absolute figures and the ratios of one run.
struct Report {
    enum Column: CaseIterable { case direct, busymate, mitmdump }

    let connections: Int
    let seconds: Double
    var http2Connections = 0
    var webSocketWindow = 0
    var rows: [(name: String, results: [Column: LoadResult])] = []
    var mint: (p50: Double, p99: Double)?
    var memory: MemoryBench.Result?
    /// Peak RSS of each proxy's data path at 1,000 HTTP/2 connections × 10 streams.
    var http2Memory: [Column: MemoryBench.Crowd] = [:]
    /// h2load's direct figure for each HTTP/2 cell, beside the generator's.
    var h2load: [String: H2Load.Result] = [:]
    var store: StoreBench.Result?
    var webPages: [(name: String, filter: String, milliseconds: (p50: Double, max: Double), shown: Int)] = []
    var webLive: (p50: Double, max: Double, samples: Int)?
    /// Headless Chromium's page of 140 resources, per column.
    var pageLoad: [Column: PageLoadBench.Result] = [:]
    /// Why a column's page load was not measured.
    var pageLoadFailures: [Column: String] = [:]
    /// Peak RSS of each proxy's data path at 1,000 MITM HTTP/1.1 keep-alive connections.
    var thousandMITM: [Column: MemoryBench.Crowd] = [:]
    var settingsCost: SettingsCostBench.Result?
    var breakpointCheck: BreakpointCheckBench.Result?
    var cloud: CloudBench.Result?
    /// `OpenExchangesBench`: ns per exchange.
    var openExchanges: Double?
    var notes: [String] = []

    mutating func record(_ name: String, _ column: Column, _ result: LoadResult) {
        if let index = rows.firstIndex(where: { $0.name == name }) {
            rows[index].results[column] = result
        } else {
            rows.append((name, [column: result]))
        }
    }

    func render() -> String {
        var lines = [
            "| scenario | direct | Busymate | mitmdump | Busymate / mitmdump | Busymate / direct |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows {
            let download = row.name.contains("MiB")
            // The WebSocket cell counts echoed messages (one each way through a proxy), not requests.
            let unit = row.name.hasPrefix(Scenario.webSocketPrefix) ? "msg" : "req"
            func cell(_ column: Column) -> String {
                guard let r = row.results[column], r.requests > 0 else { return "–" }
                let rate = download ? String(format: "%.0f MB/s", r.megabytesPerSecond) : String(format: "%.0f %@/s", r.perSecond, unit)
                let failed = r.failures > 0 ? ", \(r.failures) failed" : ""
                let cpu = r.proxyCPUPerRequest.isNaN ? "" : String(format: "; CPU %.0f µs/%@", r.proxyCPUPerRequest, unit)
                // Direct HTTP/2: nghttp2's h2load on the same load, beside this generator's figure.
                let check =
                    column == .direct
                    ? h2load[row.name].map { h2 in
                        String(
                            format: "; h2load %.0f req/s%@%@", h2.perSecond, h2.failed > 0 ? ", \(h2.failed) failed" : "",
                            h2.applicationProtocol == "h2" ? "" : " over \(h2.applicationProtocol), not h2")
                    } ?? "" : ""
                return rate
                    + String(
                        format: " (p50 %.2f ms, p99 %.2f ms; cores %.0f/%.0f %%%@%@)", r.percentile(0.5), r.percentile(0.99),
                        r.serverCore * 100, r.generatorCore * 100, cpu, failed) + check
            }
            func ratio(_ a: Column, _ b: Column) -> String {
                guard let x = row.results[a], let y = row.results[b], x.requests > 0, y.requests > 0 else { return "–" }
                let value = download ? x.megabytesPerSecond / y.megabytesPerSecond : x.perSecond / y.perSecond
                return value >= 10 ? String(format: "%.0f×", value) : String(format: "%.2f×", value)
            }
            lines.append(
                "| \(row.name) | \(cell(.direct)) | \(cell(.busymate)) | \(cell(.mitmdump)) | \(ratio(.busymate, .mitmdump)) | \(ratio(.busymate, .direct)) |"
            )
        }
        if let openExchanges {
            lines.append(
                String(
                    format: "| following exchanges in flight (open + close, in process, 100 open) | – | %.0f ns per exchange | – | – | – |",
                    openExchanges))
        }
        if let mint {
            lines.append(
                String(format: "| leaf certificate mint (in process) | – | p50 %.3f ms, p99 %.3f ms | – | – | – |", mint.p50, mint.p99))
        }
        if let memory {
            lines.append(
                String(
                    format:
                        "| tunnel RSS: at start; idle after the scenarios above; peak at 1,000 MITM keep-alive connections | – | %.1f MB; %.1f MB; %.1f MB | – | – | – |",
                    Double(memory.freshKiB) / 1024, Double(memory.idleKiB) / 1024, Double(memory.atThousandKiB) / 1024))
            lines.append(
                String(
                    format: "| tunnel RSS during a 1 GiB MITM download | – | %.1f MB before, %.1f MB peak (%.0f MB/s) | – | – | – |",
                    Double(memory.downloadKiB.start) / 1024, Double(memory.downloadKiB.max) / 1024, memory.downloadMBps))
        }
        if !thousandMITM.isEmpty {
            lines.append(
                Self.crowdRow(
                    "tunnel RSS at 1,000 MITM HTTP/1.1 keep-alive connections (1 KiB; mitmdump: its process)", thousandMITM))
        }
        if !pageLoad.isEmpty {
            func cell(_ column: Column) -> String {
                guard let page = pageLoad[column] else { return "–" }
                let loads = page.loads.map { String(format: "%.0f", $0) }.joined(separator: ", ")
                return String(
                    format: "median %.0f ms (loads %@ ms; %@)", page.medianMilliseconds, loads, page.protocols.joined(separator: "/"))
            }
            func ratio(_ a: Column, _ b: Column) -> String {
                // Busymate's figure over the other's, as in every row: here a time, so lower is better.
                guard let x = pageLoad[a], let y = pageLoad[b] else { return "–" }
                return String(format: "%.2f× the time", x.medianMilliseconds / y.medianMilliseconds)
            }
            lines.append(
                "| headless Chromium page load: 140 resources (120 images, 20 scripts) over HTTPS from nginx's HTTP/2, uncached, median of \(PageLoadBench.loads) | \(cell(.direct)) | \(cell(.busymate)) | \(cell(.mitmdump)) | \(ratio(.busymate, .mitmdump)) | \(ratio(.busymate, .direct)) |"
            )
        }
        if !http2Memory.isEmpty {
            lines.append(
                Self.crowdRow(
                    "tunnel RSS at 1,000 HTTP/2 connections × 10 streams (MITM keep-alive 1 KiB; mitmdump: its process)", http2Memory))
        }
        if let store {
            lines.append(
                String(
                    format: "| capture store write rate (the tunnel's write path, batches of 500) | – | %.0f exchanges/s | – | – | – |",
                    store.exchangesPerSecond))
            for query in store.queries {
                let shown = query.arguments.isEmpty ? "" : " `" + query.arguments.joined(separator: " ") + "`"
                lines.append(
                    String(
                        format:
                            "| `busymate list`%@ first page over %d rows: %@, %d shown (process start to exit) | – | p50 %.0f ms, max %.0f ms | – | – | – |",
                        shown, store.rows, query.name, query.rowsShown, query.milliseconds.p50, query.milliseconds.max))
            }
        }
        for page in webPages {
            let shown = page.filter.isEmpty ? "" : " `" + page.filter + "`"
            lines.append(
                String(
                    format:
                        "| web API `GET /api/exchanges`%@ over %d rows: %@, %d shown (curl's time) | – | p50 %.1f ms, max %.1f ms | – | – | – |",
                    shown, store?.rows ?? 0, page.name, page.shown, page.milliseconds.p50, page.milliseconds.max))
        }
        if let live = webLive {
            lines.append(
                String(
                    format:
                        "| web page: from an exchange ending at the proxy to its row on an open page (WebSocket `added`, %d one at a time) | – | p50 %.1f ms, max %.1f ms | – | – | – |",
                    live.samples, live.p50, live.max))
        }
        return lines.joined(separator: "\n")
    }

    /// A memory row: each proxy's peak under a crowd, and Busymate's over mitmdump's.
    static func crowdRow(_ label: String, _ crowds: [Column: MemoryBench.Crowd]) -> String {
        func cell(_ column: Column) -> String {
            guard let crowd = crowds[column] else { return "–" }
            let failed = crowd.result.failures > 0 ? ", \(crowd.result.failures) failed" : ""
            return String(format: "%.1f MB peak (%.0f req/s%@)", Double(crowd.kib) / 1024, crowd.result.perSecond, failed)
        }
        let ratio =
            crowds[.busymate].flatMap { b in
                crowds[.mitmdump].map { String(format: "%.2f× the memory", Double(b.kib) / Double($0.kib)) }
            } ?? "–"
        return "| \(label) | – | \(cell(.busymate)) | \(cell(.mitmdump)) | \(ratio) | – |"
    }

    func write(to url: URL) throws {
        let memory = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8))?.split(separator: "\n").first ?? ""
        let commit = (try? shell("git describe --always --dirty")) ?? "unknown"
        let text = """
            # Benchmarks

            Made by `make bench` on \(ISO8601DateFormatter().string(from: Date())), commit \(commit), \
            \(ProcessInfo.processInfo.activeProcessorCount) cores (`nproc`), \(memory.replacingOccurrences(of: "  ", with: "")).
            Release build, capture on. Origin: nginx (one worker). The system under test runs alone on core 0: nginx in the
            direct column, the proxy (the tunnel and its capture writer, or mitmdump) in the others, where nginx moves to
            core 1 beside the load generator, standing in for a remote origin. \(connections) keep-alive connections,
            \(Int(seconds)) s per cell after a 1 s warm-up; the HTTP/2 cells: \(http2Connections) connections (TLS, ALPN h2, through CONNECT
            to a proxy) with 10 or 100 streams each at once, a stream per request; direct, nghttp2's `h2load` measures the same
            load too, beside the generator's figure. The WebSocket cell: \(connections) sockets (wss, through CONNECT to a proxy)
            to an echo origin (SwiftNIO, one thread, in nginx's place on the cores), each keeping \(webSocketWindow) text messages
            of 1 KiB in flight; "msg/s" counts messages echoed back, each of which crossed a proxy twice (client to origin
            and back, both recorded), p50/p99 are a message's round trip and "CPU µs/msg" is per echoed message. Ratios are from this one run,
            each Busymate's figure over the other's: for rates higher is better; the page-load and memory rows say "the time"
            and "the memory", where lower is. "cores a/b %" is how busy core 0
            and core 1 were: a cell measures the system under test when the first is near 100 % and the second is not.
            The "every core" rows and the page load are the exception to the pinning: every process may use both cores
            (Busymate an event loop per core, mitmdump its one thread, the generator a thread per core, Chromium as it likes),
            as on a user's machine; "cores a/b %" there is the two cores' load, not one process's.
            "CPU µs/req" is the proxy's CPU time per request (all its threads, from `schedstat`), steadier than the rates
            on a shared machine: the figure to compare between runs.

            \(render())

            \(notes.map { "- \($0)" }.joined(separator: "\n"))
            \(settingsSection)
            \(cloudSection)
            ## Targets

            \(Targets.render(Targets.judge(self)))

            \(limits)
            """
        try Data(text.utf8).write(to: url)
    }

    /// The cloud sinks: rows a second, and the keep-alive cells with the sink on.
    var cloudSection: String {
        guard let cloud else { return "" }
        return """

            ## The cloud sinks

            A Busymate of its own (store on tmpfs), the keep-alive cells unpaired (sink off) and paired with the contract
            double of the account's PostgREST (sink on, sending every exchange as it is stored), in turns for \(CloudBench.rounds)
            rounds, which of the two goes first alternating; medians over rounds. "Within noise" holds when the sink costs
            no more than the off rounds differ by (5 % at least), in requests a second and in the tunnel's CPU per request. The double and its PostgreSQL run on core 1 beside the generator and the origin; the
            sink runs in the tunnel on core 0, on threads of its own in SCHED_IDLE (they run when the core has nothing else to). Then each sink drains a backlog made while its target was
            away (the double answering nothing; the team database refusing connections), timed from the first row's arrival
            to the last.

            \(CloudBench.render(cloud))

            """
    }

    /// Breakpoints and rules that match nothing, against none set.
    var settingsSection: String {
        guard let settingsCost else { return "" }
        return """

            ## Breakpoints and rules that match nothing

            A Busymate of its own with its store on tmpfs (this compares CPU work; the disk's noise would drown it),
            the keep-alive cells under each variant of settings.json (hot reload, the same tunnel), \(Int(SettingsCostBench.seconds)) s per cell.
            With no breakpoint patterns the data path checks one flag per message; with patterns, each request's and
            response's URL is matched against them, and with rules, against those too. The variants take turns for
            \(SettingsCostBench.rounds) rounds; "vs none set" is the median over rounds of each cell against the none-set cell of its
            own round, for the tunnel's CPU time per request (all its threads, from `schedstat`) and for requests per
            second. On this shared machine both drift from round to round by the spread shown for none set, far more
            than a URL match can cost, so the check timed in process below is what settles it.

            \(SettingsCostBench.render(settingsCost))
            \(breakpointCheckLine)
            """
    }

    /// The per-message check, timed in process, against a request's whole cost.
    var breakpointCheckLine: String {
        guard let check = breakpointCheck else { return "" }
        var line = String(
            format:
                "\nThe check itself, timed in this process over millions of messages: %.1f ns per message with no breakpoints set, %.0f ns with patterns that do not match.",
            check.noneNanoseconds, check.unmatchedNanoseconds)
        if let perRequest = Targets.noneSetCPUPerRequest(self) {
            line += String(
                format:
                    " A request passes it twice (request and response) and costs the tunnel %.1f µs in all (none set, MITM keep-alive): %.4f %% and %.2f %% of that.",
                perRequest, 2 * check.noneNanoseconds / 10 / perRequest, 2 * check.unmatchedNanoseconds / 10 / perRequest)
        }
        return line + "\n"
    }

    /// What limits the figures, with the profiles that show it: written by
    /// hand in `bench/limits.md`, kept beside the code that it describes.
    var limits: String {
        (try? String(contentsOfFile: "bench/limits.md", encoding: .utf8)) ?? "(bench/limits.md is missing.)\n"
    }

    private func shell(_ command: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }
}
