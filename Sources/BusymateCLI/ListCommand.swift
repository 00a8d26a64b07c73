import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// The filters `list`, `export` and `tail` share: a filter in mitmproxy's
/// language (docs/filters.md), and the older flags as shorthands for its
/// clauses, and-ed with it.
struct FilterOptions: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "A filter, e.g. '~d example.com & ~c 4xx' or '~b token' (mitmproxy's language; words are joined with spaces).",
            valueName: "filter"))
    var expression: [String] = []
    @Option(help: "Host glob, e.g. '*.example.com'.") var host: String?
    @Option(help: "HTTP method.") var method: String?
    @Option(help: "Status: 404, 4xx or 500-599.") var status: String?
    @Option(help: "Only the last span: 30s, 10m, 2h, 1d.") var since: String?
    @Option(help: "Text, any case, in the URL, a header line or a body (~u, ~h and ~b for the text as written).") var search: String?

    func filter(limit: Int) throws -> TrafficRepository.Filter {
        var filter = TrafficRepository.Filter()
        filter.hostGlob = host
        filter.method = method
        filter.search = search
        filter.limit = max(1, limit)
        filter.expression = try parsedExpression()
        // Read as `~c` and `~since` read their values.
        do {
            if let status { filter.status = try CaptureFilter.statusRange(status) }
        } catch {
            throw CLIError(description: "--status: \(error.message)")
        }
        do {
            if let since { filter.since = try CaptureFilter.time(since) }
        } catch {
            throw CLIError(description: "--since: \(error.message)")
        }
        return filter
    }

    /// No filter and no shorthand given.
    var isEmpty: Bool {
        expression.joined().trimmingCharacters(in: .whitespaces).isEmpty && host == nil && method == nil && status == nil && since == nil
            && search == nil
    }

    /// The filter, or exit status 64 (EX_USAGE) with the position at fault.
    func parsedExpression() throws -> CaptureFilter? {
        let text = expression.joined(separator: " ")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        do {
            return try CaptureFilter.parse(text)
        } catch {
            FileHandle.standardError.write(Data("busymate: invalid filter \"\(text)\": \(error)\n".utf8))
            throw ExitCode(64)
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List captured exchanges, newest first.")

    @OptionGroup var options: GroupOption
    @OptionGroup var filters: FilterOptions
    @Option(help: "How many.") var limit = 50
    @Option(help: "Only exchanges older than this id (the next page).") var before: Int64?
    @Flag(help: "Print a JSON array.") var json = false
    @Flag(help: "Read the team's PostgreSQL (busymate cloud postgres) instead of this store: every appliance that writes to it.")
    var remote = false
    @Option(
        help: ArgumentHelp(
            "The team database for --remote; '-' reads it from stdin (a URL with a password is better kept out of ps and the shell's history: '-' or $BUSYMATE_REMOTE). Default: $BUSYMATE_REMOTE, else this appliance's own, as root.",
            valueName: "postgres-url"))
    var database: String?

    func validate() throws {
        if database != nil && !remote { throw ValidationError("--database goes with --remote") }
        if remote && before != nil { throw ValidationError("--before takes a local id; with --remote, use ~until") }
    }

    func run() async throws {
        if remote {
            try await RemoteListing.run(filters, database: database, paths: options.paths, limit: limit, json: json)
            return
        }
        var filter = try filters.filter(limit: limit)
        filter.before = before
        let traffic = TrafficRepository(database: try StoreAccess.open(options.paths))
        let records = try traffic.list(filter)
        if json {
            let sockets = try WebSocketRepository(database: traffic.database).sockets(
                exchangeIDs: records.filter { $0.status == 101 }.compactMap(\.id))
            // Each row's deep link into the page (the login, if asked, replays it).
            let page = Web.URLCommand.pageBase(options.paths)
            ExchangeJSON.write(
                ExchangeJSON.array(
                    try records.map { record in
                        let socket = record.id.flatMap { sockets[$0] }.map(WebSocketJSON.socket) ?? JSONNode(.null)
                        let link = ExchangeJSON.string(record.id.map { "\(page)/\(Web.URLCommand.fragment(exchange: $0, device: nil))" })
                        return ExchangeJSON.object(
                            ExchangeJSON.summaryMembers(record, resentFrom: try StoreAccess.resentFrom(record, in: traffic)) + [
                                ("websocket", socket), ("link", link),
                            ])
                    }))
            return
        }
        let breakpoints = BreakpointRepository(database: traffic.database)
        var held = (try? breakpoints.held(among: records.map(\.requestID))) ?? []
        // In flight (not stored yet): on the first page of an unfiltered list.
        var open: [OpenExchangesFile.Entry] = []
        if before == nil, filters.isEmpty, let file = OpenExchangesFile.read(options.paths) {
            // The tunnel rewrites the file up to 4 times a second, after the
            // row commits: an entry already stored is no longer in flight.
            let stored = (try? traffic.storedRequestIDs(among: file.entries.map(\.requestID))) ?? []
            open = file.entries.filter { !stored.contains($0.requestID) }
            held.formUnion(((try? breakpoints.held()) ?? []).map(\.requestID))
        }
        let sockets =
            (try? WebSocketRepository(database: traffic.database).sockets(exchangeIDs: records.filter { $0.status == 101 }.compactMap(\.id)))
            ?? [:]
        let table = ListTable(terminal: Terminal.standardOutput)
        Pager.print(table.render(records, held: held, open: open, sockets: sockets), page: false)
    }

}
