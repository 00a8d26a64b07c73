import Foundation

/// One frame on `control.sock`, between the CLI, the tunnel and the
/// supervisor. JSON, so a person can follow it with `strace -s`.
public struct ControlMessage: Codable, Sendable {
    public enum Kind: String, Codable, Sendable {
        // CLI → supervisor
        case status, tunnelStart, tunnelStop, tunnelRestart, webStart, webStop, webRestart
        // CLI (root only) → supervisor: `busymate pair` / `unpair`
        case pair, unpair
        // CLI (root only) → supervisor: `busymate cloud postgres URL|--off`
        case teamDatabase
        // CLI (root only) → supervisor: the package's upgrade; the next stop
        // leaves the tunnel and the web front for the next supervisor
        case handover
        // tunnel or web → supervisor; `hello` carries the listeners the child
        // holds, and `role` "web" from the web front (nil: the tunnel)
        case hello, state, pong
        // supervisor → tunnel; `listeners` carries the full set to serve;
        // `serve` starts accepting (only one tunnel accepts at a time)
        case listeners, ping, serve
        // any answer
        case reply
    }

    public var kind: Kind
    public var pid: Int32?
    public var listeners: [String]?
    public var state: TunnelState?
    public var seq: Int?
    public var ok: Bool?
    public var message: String?
    public var report: StatusReport?
    public var role: String?
    /// `pair`'s code, API and name.
    public var pairing: PairingRequest?
    /// `teamDatabase`'s URL (nil: off).
    public var url: String?

    public init(
        _ kind: Kind, pid: Int32? = nil, listeners: [String]? = nil, state: TunnelState? = nil, seq: Int? = nil,
        ok: Bool? = nil, message: String? = nil, report: StatusReport? = nil, role: String? = nil
    ) {
        self.role = role
        self.kind = kind
        self.pid = pid
        self.listeners = listeners
        self.state = state
        self.seq = seq
        self.ok = ok
        self.message = message
        self.report = report
    }

    public static func pair(_ request: PairingRequest) -> ControlMessage {
        var message = ControlMessage(.pair)
        message.pairing = request
        return message
    }

    public static func reply(ok: Bool, _ message: String? = nil) -> ControlMessage { ControlMessage(.reply, ok: ok, message: message) }

    public func encoded() throws -> [UInt8] { Array(try StatusCoding.encoder.encode(self)) }

    public static func decode(_ bytes: [UInt8]) throws -> ControlMessage {
        try StatusCoding.decoder.decode(ControlMessage.self, from: Data(bytes))
    }
}

/// `busymate pair CODE [--api URL] [--anon-key KEY] [--name NAME]`.
public struct PairingRequest: Codable, Sendable {
    public var code: String
    /// Nil: the ones the last pairing kept (the private `cloud.json`).
    public var api: String?
    public var anonKey: String?
    public var name: String?
    public init(code: String, api: String?, anonKey: String?, name: String?) {
        self.code = code
        self.api = api
        self.anonKey = anonKey
        self.name = name
    }
}

extension UnixSocket {
    public func send(_ message: ControlMessage, descriptors: [Int32] = []) throws {
        try sendFrame(try message.encoded(), descriptors: descriptors)
    }

    /// The next message, or nil at end of file.
    public func receive() throws -> (message: ControlMessage, descriptors: [Int32])? {
        guard let frame = try receiveFrame() else { return nil }
        return (try ControlMessage.decode(frame.payload), frame.descriptors)
    }
}
