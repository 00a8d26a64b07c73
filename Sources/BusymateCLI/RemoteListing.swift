import ArgumentParser
import BusymateShared
import CaptureStore
import Cloud
import Foundation

/// `busymate list --remote`: a team's PostgreSQL (every appliance that
/// writes to it), read with the same filter language as the local store.
enum RemoteListing {
    /// The team database's URL: `--database`, `$BUSYMATE_REMOTE`, or this
    /// appliance's own (root's private copy).
    static func address(_ given: String?, paths: GroupPaths) throws -> TeamDatabase.Address {
        var url = given ?? ProcessInfo.processInfo.environment["BUSYMATE_REMOTE"]
        if url == "-" {
            url = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces)
            if url?.isEmpty ?? true { throw CLIError(description: "--database -: no URL on stdin") }
        }
        if url == nil {
            do {
                url = try TeamDatabase.read(paths.privateTeamDatabase)?.url
            } catch {
                throw CLIError(
                    description:
                        "--remote: cannot read this appliance's team database (\(error)); give --database URL or set BUSYMATE_REMOTE")
            }
        }
        guard let url else {
            throw CLIError(
                description:
                    "--remote: no team database: give --database URL, set BUSYMATE_REMOTE, or set one (busymate cloud postgres URL)")
        }
        do {
            return try TeamDatabase.Address(url)
        } catch {
            throw CLIError(description: "--remote: \(error)")
        }
    }

    /// The filter and the shorthand flags as one filter (and-ed).
    static func filter(_ options: FilterOptions) throws -> CaptureFilter? {
        var terms: [CaptureFilter] = []
        if let expression = try options.parsedExpression() { terms.append(expression) }
        if let host = options.host {
            let glob = NSRegularExpression.escapedPattern(for: host).replacingOccurrences(of: "\\*", with: ".*").replacingOccurrences(
                of: "\\?", with: ".")
            terms.append(.clause(.domain("^\(glob)$")))
        }
        if let method = options.method { terms.append(.clause(.method("^\(NSRegularExpression.escapedPattern(for: method))$"))) }
        do {
            if let status = options.status { terms.append(.clause(.status(try CaptureFilter.statusRange(status)))) }
        } catch {
            throw CLIError(description: "--status: \(error.message)")
        }
        do {
            if let since = options.since { terms.append(.clause(.since(try CaptureFilter.time(since)))) }
        } catch {
            throw CLIError(description: "--since: \(error.message)")
        }
        if let search = options.search {
            let text = NSRegularExpression.escapedPattern(for: search)
            terms.append(.or(.clause(.url(text)), .or(.clause(.header(text, .either)), .clause(.body(text, .either)))))
        }
        guard let first = terms.first else { return nil }
        return terms.dropFirst().reduce(first) { .and($0, $1) }
    }

    static let summaryKeys: Set<String> = [
        "method", "url", "host", "status", "reason", "tls", "duration_ms", "error", "rule", "request_size", "response_size",
        "request_content_type", "response_content_type", "device", "marker", "comment", "http_version",
    ]

    static func run(_ options: FilterOptions, database: String?, paths: GroupPaths, limit: Int, json: Bool) async throws {
        let address = try address(database, paths: paths)
        let filter = try filter(options)
        let entries: [RemoteEntry]
        do {
            entries = try await RemoteEntries(address: address).list(filter, limit: limit)
        } catch {
            throw CLIError(description: error.description)
        }
        let rows = entries.map { entry -> (RemoteEntry, JSONNode?) in (entry, try? JSONParser.parse(entry.payload)) }
        if json {
            let items = rows.map { entry, payload -> JSONNode in
                var members: [ExchangeJSON.Member] = [
                    ("request_id", ExchangeJSON.string(entry.requestID)), ("device_uuid", ExchangeJSON.string(entry.deviceUUID)),
                    ("ts", ExchangeJSON.string(DatabaseDateText.iso8601(entry.ts))), ("kind", ExchangeJSON.string(entry.kind)),
                ]
                if case let .object(fields)? = payload?.value { members += fields.filter { summaryKeys.contains($0.key) } }
                return ExchangeJSON.object(members)
            }
            ExchangeJSON.write(ExchangeJSON.array(items))
            return
        }
        if rows.isEmpty {
            print("no exchanges in \(address.redacted) match")
            return
        }
        let time = DateFormatter()
        time.dateFormat = "MM-dd HH:mm:ss"
        for (entry, payload) in rows {
            func text(_ key: String) -> String {
                switch payload?[key]?.value {
                case let .string(s)?: return s
                case let .number(n)?: return n
                default: return "-"
                }
            }
            let line = [
                time.string(from: entry.ts), String(entry.deviceUUID.prefix(8)),
                text("method").padding(toLength: 7, withPad: " ", startingAt: 0),
                text("status").padding(toLength: 4, withPad: " ", startingAt: 0), text("url"),
            ]
            print(line.joined(separator: "  "))
        }
    }
}
