import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Tail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow new exchanges as they are captured (or, with --events, the notifications).")

    @OptionGroup var options: GroupOption
    @Flag(name: .long, help: "Show notifications between the processes as they arrive.") var events = false
    @OptionGroup var filters: FilterOptions
    @Flag(help: "One JSON object per line (a `list --json` row).") var json = false
    @Flag(help: "Follow WebSocket messages instead, of the sockets the filter keeps (with --json: one message per line).") var messages =
        false

    func validate() throws {
        if messages && events { throw ValidationError("--messages and --events follow different things; give one") }
    }

    func run() async throws {
        // A bad filter is refused before anything is opened.
        let selection = try filters.filter(limit: 1000)
        // Signals first: once the socket exists, a stop must remove it.
        let interrupts = SignalStream.make([SIGINT, SIGTERM])
        let notifier: Notifier
        do {
            notifier = try Notifier(paths: options.paths, role: "cli")
        } catch {
            throw CLIError(description: "cannot listen in \(options.paths.notifyDirectory.path): \(error)")
        }
        Task {
            for await _ in interrupts {
                notifier.close()
                Foundation.exit(0)
            }
        }
        if messages {
            try await tailMessages(notifier, selection)
            return
        }
        guard events else {
            try await tailExchanges(notifier, selection)
            return
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for await note in notifier.notifications() {
            // Unbuffered, so a pipe sees each line as it happens.
            FileHandle.standardOutput.write(
                Data(
                    "\(formatter.string(from: Date())) \(note.name.rawValue) from \(note.sender)\(note.payload.map { " \($0)" } ?? "")\n"
                        .utf8))
        }
    }
}

extension Tail {
    /// New rows, each time the tunnel says it committed some.
    /// Rows newer than the newest at start that `selection` keeps.
    func tailExchanges(_ notifier: Notifier, _ selection: TrafficRepository.Filter) async throws {
        let traffic = TrafficRepository(database: try StoreAccess.open(options.paths))
        var last = try traffic.lastID()
        // Exchanges shown as they started (unfiltered tails only: a filter runs over stored rows).
        var started: Set<String> = Set(OpenExchangesFile.read(options.paths)?.entries.map(\.requestID) ?? [])
        for await note in notifier.notifications() where note.name == .newTrafficCaptured || note.name == .openExchangesChanged {
            if note.name == .openExchangesChanged {
                guard filters.isEmpty, let file = OpenExchangesFile.read(options.paths) else { continue }
                for entry in file.entries where !started.contains(entry.requestID) {
                    if json {
                        let line = ExchangeJSON.object([
                            ("request_id", ExchangeJSON.string(entry.requestID)), ("started_at", ExchangeJSON.date(entry.startedAt)),
                            ("method", ExchangeJSON.string(entry.method)), ("url", ExchangeJSON.string(entry.url)),
                            ("state", ExchangeJSON.string("open")),
                        ])
                        FileHandle.standardOutput.write(Data((JSONWriter.compact(line) + "\n").utf8))
                    } else {
                        FileHandle.standardOutput.write(
                            Data((Terminal.visible("→ \(entry.method) \(entry.url) (started, in flight)", keepNewlines: false) + "\n").utf8)
                        )
                    }
                }
                started = Set(file.entries.map(\.requestID))
                continue
            }
            // Everything stored since, in pages: a burst is not cut at a limit.
            while true {
                let (fresh, newest) = try traffic.stored(after: last, selection)
                for record in fresh {
                    if json {
                        let row = ExchangeJSON.summary(record, resentFrom: try StoreAccess.resentFrom(record, in: traffic))
                        FileHandle.standardOutput.write(Data((JSONWriter.compact(row) + "\n").utf8))
                    } else {
                        let status = ListTable.status(record)
                        let line = "\(record.id ?? 0) \(record.method) \(status) \(record.url)\(record.error.map { "  ! \($0)" } ?? "")"
                        FileHandle.standardOutput.write(Data((Terminal.visible(line, keepNewlines: false) + "\n").utf8))
                    }
                }
                guard fresh.count == selection.limit, let next = fresh.last?.id else {
                    last = newest
                    break
                }
                last = next
            }
        }
    }
}

extension Tail {
    /// New WebSocket messages as the tunnel commits them, of the sockets
    /// `selection` keeps (decided once per socket).
    func tailMessages(_ notifier: Notifier, _ selection: TrafficRepository.Filter) async throws {
        let database = try StoreAccess.open(options.paths)
        let sockets = WebSocketRepository(database: database)
        let traffic = TrafficRepository(database: database)
        var last = try sockets.lastMessageID()
        var kept: [Int64: Bool] = [:]
        for await note in notifier.notifications() where note.name == .newTrafficCaptured {
            while true {
                let batch = try sockets.stored(after: last)
                guard let newest = batch.last?.message.id else { break }
                let unknown = Set(batch.map(\.exchangeID)).filter { kept[$0] == nil }
                if !unknown.isEmpty {
                    let chosen = filters.isEmpty ? unknown : try traffic.ids(among: unknown, selection)
                    for id in unknown { kept[id] = chosen.contains(id) }
                }
                var out = ""
                for (exchangeID, message) in batch where kept[exchangeID] == true {
                    let payload = try? sockets.payload(message)
                    if json {
                        out += JSONWriter.compact(WebSocketJSON.message(message, payload: payload, exchangeID: exchangeID)) + "\n"
                    } else {
                        let lines =
                            [MessageLines.header(message, exchangeID: exchangeID)]
                            + MessageLines.payload(message, payload, raw: true, limit: 4096)
                        out += Terminal.visible(lines.joined(separator: "\n")) + "\n"
                    }
                }
                // Unbuffered, so a pipe sees each message as it is stored.
                if !out.isEmpty { FileHandle.standardOutput.write(Data(out.utf8)) }
                last = newest
            }
        }
    }
}
