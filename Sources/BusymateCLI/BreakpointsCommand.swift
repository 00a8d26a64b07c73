import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// `busymate breakpoints`: the messages the tunnel holds, and their
/// resolution. A resolution is asked for in the store (the first asker
/// wins) and announced with `breakpointContinue`; the tunnel carries it out.
struct Breakpoints: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Held requests and responses: list, show, continue (as is or edited), abort; which URLs are held (settings.json's breakpoints).",
        subcommands: [ListHeld.self, ShowHeld.self, Continue.self, Abort.self, AddPattern.self, RemovePattern.self, ListPatterns.self])

    static func repository(_ paths: GroupPaths, writing: Bool = false) throws -> BreakpointRepository {
        BreakpointRepository(database: try StoreAccess.open(paths, readOnly: !writing))
    }

    static func held(_ id: Int64, in repository: BreakpointRepository) throws -> BreakpointEvent {
        do {
            return try HeldMessageResolution.held(id, in: repository)
        } catch let failure as HeldMessageResolution.Failure {
            throw CLIError(description: failure.description)
        }
    }

    /// Asks for `request`, tells the tunnel, and waits for it to be carried out.
    static func resolve(
        _ event: BreakpointEvent, _ request: BreakpointEvent.Request, raw: Data? = nil, repository: BreakpointRepository,
        paths: GroupPaths
    ) throws {
        do {
            let outcome = try HeldMessageResolution.resolve(event, request, raw: raw, repository: repository, paths: paths, sender: "cli")
            print("breakpoint \(event.id ?? 0): \(outcome.rawValue)")
        } catch let failure as HeldMessageResolution.Failure {
            throw CLIError(description: failure.description)
        }
    }
}

struct ListHeld: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Held messages, oldest first (--all: recent resolved ones too).")

    @OptionGroup var options: GroupOption
    @Flag(help: "Also the most recent resolved ones.") var all = false
    @Flag(help: "Print a JSON array.") var json = false

    func run() async throws {
        let repository = try Breakpoints.repository(options.paths)
        let events = all ? try repository.recent(limit: 100).reversed() : try repository.held()
        if json {
            SettingsJSON.write(JSONNode(.array(events.map { SettingsJSON.object(SettingsJSON.breakpointMembers($0)) })))
            return
        }
        if events.isEmpty {
            print(all ? "no breakpoint events" : "nothing is held")
            return
        }
        for event in events {
            let state =
                event.outcome?.rawValue
                ?? (event.requested.map { "asked: \($0.rawValue)" } ?? "held \(Int(Date().timeIntervalSince(event.pausedAt)))s")
            var line =
                "\(String(event.id ?? 0).padding(toLength: 6, withPad: " ", startingAt: 0)) \(event.kind.rawValue.padding(toLength: event.kind.isMessage ? 20 : 9, withPad: " ", startingAt: 0))"
            line +=
                "\(state.padding(toLength: 14, withPad: " ", startingAt: 0)) \(event.method.padding(toLength: 7, withPad: " ", startingAt: 0)) \(event.url)"
            print(line)
        }
    }
}

struct ShowHeld: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Print a held message as raw HTTP (--final: what was sent).")

    @OptionGroup var options: GroupOption
    @Argument(help: "The breakpoint's id.") var id: Int64
    @Flag(help: "What was forwarded instead of what was held.") var final = false
    @Flag(help: "Every field, as JSON.") var json = false

    func run() async throws {
        guard let event = try Breakpoints.repository(options.paths).find(id: id) else { throw CLIError(description: "no breakpoint \(id)") }
        if json {
            let raw = [
                ("raw_http_initial", ExchangeJSON.string(String(decoding: event.rawHTTPInitial, as: UTF8.self))),
                ("raw_http_final", ExchangeJSON.string(event.rawHTTPFinal.map { String(decoding: $0, as: UTF8.self) })),
            ]
            SettingsJSON.write(SettingsJSON.object(SettingsJSON.breakpointMembers(event) + raw))
            return
        }
        guard let raw = final ? event.rawHTTPFinal : event.rawHTTPInitial else {
            throw CLIError(description: "breakpoint \(id) sent nothing on (\(event.outcome?.rawValue ?? "still held"))")
        }
        FileHandle.standardOutput.write(raw)
    }
}

struct Continue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a held message on: as it is, edited in $EDITOR (--edit), or as in a file (--raw-file); Content-Length is fixed up.")

    @OptionGroup var options: GroupOption
    @Argument(help: "The breakpoint's id.") var id: Int64
    @Flag(help: "Edit the raw message in $VISUAL or $EDITOR first.") var edit = false
    @Option(help: "Send this raw HTTP message instead (CRLF or LF line ends).") var rawFile: String?

    func validate() throws {
        if edit && rawFile != nil { throw ValidationError("--edit and --raw-file are alternatives") }
    }

    func run() async throws {
        let paths = options.paths
        let repository = try Breakpoints.repository(paths, writing: true)
        let event = try Breakpoints.held(id, in: repository)
        var edited: Data?
        if edit {
            edited = try RawMessageEditor.edit(event.rawHTTPInitial, name: "busymate-breakpoint-\(id)")
        } else if let rawFile {
            guard let data = FileManager.default.contents(atPath: rawFile) else { throw CLIError(description: "cannot read \(rawFile)") }
            edited = data
        }
        guard let edited, edited != event.rawHTTPInitial else {
            try Breakpoints.resolve(event, .continue, repository: repository, paths: paths)
            return
        }
        try RawMessageEditor.check(edited, replacing: event)
        try Breakpoints.resolve(event, .edit, raw: edited, repository: repository, paths: paths)
    }
}

struct Abort: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Abort a held message: a request is answered 502, a response's client is hung up on, a WebSocket message is dropped.")

    @OptionGroup var options: GroupOption
    @Argument(help: "The breakpoint's id.") var id: Int64

    func run() async throws {
        let paths = options.paths
        let repository = try Breakpoints.repository(paths, writing: true)
        let event = try Breakpoints.held(id, in: repository)
        try Breakpoints.resolve(event, .abort, repository: repository, paths: paths)
    }
}
