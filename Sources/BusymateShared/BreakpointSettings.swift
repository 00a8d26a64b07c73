import Foundation

/// `breakpoints` in `settings.json`: which requests are held before they
/// go upstream, which responses before they reach the client, and for how
/// long before the original goes on by itself.
public struct BreakpointSettings: Sendable, Equatable {
    /// URL patterns or filters (`RuleMatch`), as rules take.
    public var request: [RuleMatch] = []
    public var response: [RuleMatch] = []
    /// WebSocket messages, by their socket's handshake: those the client
    /// sends, and those the server sends.
    public var messagesFromClient: [RuleMatch] = []
    public var messagesFromServer: [RuleMatch] = []
    /// 0 ("never"): held until someone resolves it, as mitmproxy's intercept.
    public var timeoutSeconds: Double = 60

    public init() {}

    /// No patterns: forwarding streams as if breakpoints did not exist.
    public var isEmpty: Bool { request.isEmpty && response.isEmpty && messagesFromClient.isEmpty && messagesFromServer.isEmpty }

    /// When a message held at `pausedAt` goes on by itself; nil: never.
    public func expiry(pausedAt: Date) -> Date? {
        timeoutSeconds > 0 ? pausedAt.addingTimeInterval(timeoutSeconds) : nil
    }
}
