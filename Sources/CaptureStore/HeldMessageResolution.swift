import BusymateShared
import Foundation

/// Resolving a held message from outside the tunnel (the CLI, the web
/// page): the resolution is asked for in the store, the first asker wins,
/// and `breakpointContinue` tells the tunnel, which carries it out.
public enum HeldMessageResolution {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        /// The line of an edit at fault, when it is one.
        public var line: Int?
        public init(_ description: String, line: Int? = nil) {
            self.description = description
            self.line = line
        }
    }

    /// The event `id`, when it is still held by a live tunnel (one that is
    /// gone has its events marked abandoned).
    public static func held(_ id: Int64, in repository: BreakpointRepository) throws -> BreakpointEvent {
        guard let event = try repository.find(id: id) else { throw Failure("no breakpoint \(id)") }
        if let outcome = event.outcome { throw Failure("breakpoint \(id) is no longer held: \(outcome.rawValue)") }
        if let requested = event.requested { throw Failure("breakpoint \(id) was already asked to \(requested.rawValue)") }
        // Any live tunnel with that pid: the group path may be spelt differently here.
        guard ProcessProbe.isAlive(event.tunnelPID), !ProcessProbe.isZombieOrGone(event.tunnelPID),
            ProcessProbe.commandName(event.tunnelPID) == "busymate-tunnel"
        else {
            try? repository.resolve(id: id, .abandoned, final: nil)
            throw Failure("breakpoint \(id) is no longer held: the tunnel that held it (pid \(event.tunnelPID)) is gone")
        }
        return event
    }

    /// Refuses an edit the tunnel could not send, saying where it is wrong
    /// (the tunnel checks again).
    public static func check(_ edited: Data, replacing event: BreakpointEvent) throws(Failure) {
        // A WebSocket message is any bytes; a text one, UTF-8.
        if event.kind.isMessage {
            if event.method == "TEXT", String(validating: edited, as: UTF8.self) == nil {
                throw Failure("a text message must be UTF-8; breakpoint \(event.id ?? 0) stays held")
            }
            return
        }
        let kind: RawHTTPMessage.Kind = event.kind == .request ? .request : .response
        do {
            let original = try RawHTTPMessage.parse(Array(event.rawHTTPInitial), as: kind)
            let message = try RawHTTPMessage.parse(Array(edited), as: kind)
            try message.checkEditable(replacing: original)
        } catch {
            let text = error.description
            // RawHTTPMessage's messages start "line N: ".
            let line = text.hasPrefix("line ") ? Int(text.dropFirst(5).prefix { $0.isNumber }) : nil
            throw Failure("the edited \(kind.rawValue) is not valid HTTP: \(text); breakpoint \(event.id ?? 0) stays held", line: line)
        }
    }

    /// Asks for `request`, tells the tunnel, and waits (up to ten seconds)
    /// for it to be carried out; returns the outcome. Blocks.
    public static func resolve(
        _ event: BreakpointEvent, _ request: BreakpointEvent.Request, raw: Data? = nil, repository: BreakpointRepository,
        paths: GroupPaths, sender: String
    ) throws -> BreakpointEvent.Outcome {
        guard let id = event.id else { throw Failure("a breakpoint without an id") }
        switch try repository.request(id: id, request, raw: raw) {
        case .claimed: break
        case .notFound: throw Failure("no breakpoint \(id)")
        case let .lost(now):
            throw Failure("breakpoint \(id) was resolved first by another: \(now.outcome?.rawValue ?? now.requested?.rawValue ?? "?")")
        }
        if let notifier = try? Notifier(paths: paths, role: sender) {
            notifier.post(.breakpointContinue, payload: "\(id)")
            notifier.close()
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard let now = try repository.find(id: id) else { throw Failure("breakpoint \(id) is gone from the store") }
            if let outcome = now.outcome { return outcome }
            if now.requested == nil { throw Failure("the tunnel refused the request (see journalctl); breakpoint \(id) stays held") }
            usleep(20_000)
        }
        throw Failure("asked to \(request.rawValue) breakpoint \(id), but the tunnel has not done it within 10 s")
    }
}
