import BusymateShared
import Foundation

/// What breakpoints and rules cost the streaming path when nothing matches
/// them, on Busymate alone: the same keep-alive cells with none set, with
/// breakpoint patterns for another host, and with those plus 20 rules, then
/// with none again (how far the figure drifts within the run).
enum SettingsCostBench {
    struct Variant {
        var label: String
        var extra: String
    }

    struct Result {
        /// (variant, scenario) → the cell.
        var cells: [(variant: String, scenario: String, result: LoadResult)] = []
    }

    static let none = Variant(label: "none set", extra: "")
    static let breakpointsElsewhere = "breakpoints on another host"
    static let variants: [Variant] = [
        none,
        Variant(label: breakpointsElsewhere, extra: #", "breakpoints": {"request": ["elsewhere.test/*"], "response": ["elsewhere.test/*"]}"#),
        Variant(label: "breakpoints + 20 rules, none matching", extra: ", \"breakpoints\": {\"request\": [\"elsewhere.test/*\"], \"response\": [\"elsewhere.test/*\"]}, \"rules\": ["
            + (1...20).map { #"{"name": "r\#($0)", "match": "elsewhere-\#($0).test/*", "action": "headers", "request": {"add": {"X-R": "\#($0)"}}}"# }
            .joined(separator: ", ") + "]"),
        Variant(label: "none set, again", extra: ""),
    ]

    /// Rewrites the running Busymate's settings.json and waits until its tunnel runs on them.
    static func apply(_ variant: Variant, group: GroupPaths, origin: NginxOrigin) throws {
        try Data(Busymate.settings(origin: origin, extra: variant.extra).utf8).write(to: group.settings)
        let sha = SettingsFile.read(group.settings).sha256
        try Wait.until("the tunnel to apply \(variant.label)", seconds: 10) { TunnelStatus.read(group.status)?.settingsSha256 == sha }
    }

    static func render(_ result: Result) -> String {
        let scenarios = result.cells.reduce(into: [String]()) { if !$0.contains($1.scenario) { $0.append($1.scenario) } }
        let labels = result.cells.reduce(into: [String]()) { if !$0.contains($1.variant) { $0.append($1.variant) } }
        func rate(_ label: String, _ scenario: String) -> Double? {
            result.cells.first { $0.variant == label && $0.scenario == scenario }.map(\.result.perSecond)
        }
        /// The two runs with nothing set, averaged: what the others are compared with.
        func baseline(_ scenario: String) -> Double? {
            let runs = [none.label, "none set, again"].compactMap { rate($0, scenario) }
            return runs.isEmpty ? nil : runs.reduce(0, +) / Double(runs.count)
        }
        var lines = ["| Busymate, settings | " + scenarios.map { "\($0) | vs none set" }.joined(separator: " | ") + " |",
                     "|---|" + scenarios.map { _ in "---|---|" }.joined() ]
        for label in labels {
            let cells = scenarios.map { scenario -> String in
                guard let value = rate(label, scenario), let base = baseline(scenario) else { return "– | –" }
                return String(format: "%.0f req/s | %.3f×", value, value / base)
            }
            lines.append("| \(label) | " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }

    /// `label`'s slowest cell against the baseline.
    static func worstRatio(_ result: Result, _ label: String) -> Double? {
        let ratios = result.cells.filter { $0.variant == label }.compactMap { cell -> Double? in
            let base = result.cells.filter { $0.variant.hasPrefix("none set") && $0.scenario == cell.scenario }.map(\.result.perSecond)
            guard !base.isEmpty else { return nil }
            return cell.result.perSecond / (base.reduce(0, +) / Double(base.count))
        }
        return ratios.min()
    }

    /// How far the two baseline runs differ, relative to their mean: the noise.
    static func drift(_ result: Result) -> Double? {
        let spreads = Set(result.cells.map(\.scenario)).compactMap { scenario -> Double? in
            let base = result.cells.filter { $0.variant.hasPrefix("none set") && $0.scenario == scenario }.map(\.result.perSecond)
            guard base.count == 2 else { return nil }
            return abs(base[0] - base[1]) / ((base[0] + base[1]) / 2)
        }
        return spreads.max()
    }
}
