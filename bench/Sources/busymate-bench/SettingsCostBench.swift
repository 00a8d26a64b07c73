import BusymateShared
import Foundation

/// What breakpoints and rules cost the streaming path when nothing matches
/// them, on Busymate alone: the keep-alive cells with none set, with
/// breakpoint patterns for another host, and with those plus 20 rules. The
/// variants take turns, round after round, and each is compared with the
/// none-set cell of its own round, so a machine that drifts (this one does)
/// moves both sides of a ratio alike.
enum SettingsCostBench {
    struct Variant {
        var label: String
        var extra: String
    }

    struct Cell {
        var round: Int
        var variant: String
        var scenario: String
        var result: LoadResult
    }

    struct Result {
        var cells: [Cell] = []
    }

    static let rounds = 5
    /// Seconds per cell (after the usual one-second warm-up).
    static let seconds = 3.0
    static let none = Variant(label: "none set", extra: "")
    static let breakpointsElsewhere = "breakpoints on another host"
    static let variants: [Variant] = [
        none,
        Variant(
            label: breakpointsElsewhere, extra: #", "breakpoints": {"request": ["elsewhere.test/*"], "response": ["elsewhere.test/*"]}"#),
        Variant(
            label: "breakpoints + 20 rules, none matching",
            extra: ", \"breakpoints\": {\"request\": [\"elsewhere.test/*\"], \"response\": [\"elsewhere.test/*\"]}, \"rules\": ["
                + (1...20).map {
                    #"{"name": "r\#($0)", "match": "elsewhere-\#($0).test/*", "action": "headers", "request": {"add": {"X-R": "\#($0)"}}}"#
                }
                .joined(separator: ", ") + "]"),
    ]

    /// Rewrites the running Busymate's settings.json and waits until its tunnel runs on them.
    static func apply(_ variant: Variant, group: GroupPaths, origin: NginxOrigin) throws {
        try Data(Busymate.settings(origin: origin, extra: variant.extra).utf8).write(to: group.settings)
        let sha = SettingsFile.read(group.settings).sha256
        try Wait.until("the tunnel to apply \(variant.label)", seconds: 10) { TunnelStatus.read(group.status)?.settingsSha256 == sha }
    }

    static func median(_ values: [Double]) -> Double? {
        let values = values.filter { !$0.isNaN }
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    enum Metric {
        case rate, cpuPerRequest

        func value(_ result: LoadResult) -> Double { self == .rate ? result.perSecond : result.proxyCPUPerRequest }
    }

    private static func value(_ result: Result, _ round: Int, _ variant: String, _ scenario: String, _ metric: Metric) -> Double? {
        result.cells.first { $0.round == round && $0.variant == variant && $0.scenario == scenario }.map { metric.value($0.result) }
    }

    /// The median over rounds of `variant` / none set in the same round.
    static func ratio(_ result: Result, _ variant: String, _ scenario: String, _ metric: Metric) -> Double? {
        median(
            (0..<rounds).compactMap { round in
                guard let cell = value(result, round, variant, scenario, metric),
                    let base = value(result, round, none.label, scenario, metric), base > 0
                else { return nil }
                return cell / base
            })
    }

    /// How far the none-set cells of one scenario spread across rounds, relative to their median: the noise.
    static func noise(_ result: Result, _ scenario: String, _ metric: Metric) -> Double? {
        let values = (0..<rounds).compactMap { value(result, $0, none.label, scenario, metric) }
        guard let mid = median(values), mid > 0, let low = values.min(), let high = values.max() else { return nil }
        return (high - low) / mid
    }

    static func scenarios(_ result: Result) -> [String] {
        result.cells.reduce(into: [String]()) { if !$0.contains($1.scenario) { $0.append($1.scenario) } }
    }

    static func render(_ result: Result) -> String {
        let scenarios = scenarios(result)
        var lines = [
            "| Busymate, settings (median of \(rounds) rounds) | "
                + scenarios.map { "\($0): tunnel CPU per request | vs none set | req/s | vs none set" }.joined(separator: " | ") + " |",
            "|---|" + scenarios.map { _ in "---|---|---|---|" }.joined(),
        ]
        for variant in variants.map(\.label) {
            let cells = scenarios.map { scenario -> String in
                let cpu = median((0..<rounds).compactMap { value(result, $0, variant, scenario, .cpuPerRequest) })
                let rate = median((0..<rounds).compactMap { value(result, $0, variant, scenario, .rate) })
                guard let cpu, let rate else { return "– | – | – | –" }
                if variant == none.label {
                    return String(
                        format: "%.1f µs | 1 (rounds spread %.0f %%) | %.0f | 1 (rounds spread %.0f %%)", cpu,
                        (noise(result, scenario, .cpuPerRequest) ?? 0) * 100,
                        rate, (noise(result, scenario, .rate) ?? 0) * 100)
                }
                return String(
                    format: "%.1f µs | %.3f× | %.0f | %.3f×", cpu, ratio(result, variant, scenario, .cpuPerRequest) ?? .nan, rate,
                    ratio(result, variant, scenario, .rate) ?? .nan)
            }
            lines.append("| \(variant) | " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }
}
