import Foundation

/// The names posted between processes, in place of Darwin notifications.
public enum NotificationName: String, Sendable, CaseIterable, Codable {
    case settingsDidChange
    case newTrafficCaptured
    case tunnelStateChanged
    case breakpointPaused
    case breakpointContinue
    case caDidChange
    /// `open-exchanges.json` was rewritten (at most four times a second).
    case openExchangesChanged
    /// A device came online or went offline (payload: its name).
    case devicePresenceChanged
    /// The live capture mode changed (payload: the mode).
    case modeDidChange
    /// A message waits to be sent into an open WebSocket (payload: its `ws_sends` id).
    case webSocketSend
}

/// One datagram: `busymate/1 <name> <sender> [payload]`, UTF-8, one line.
/// Small and greppable, so `socat` can post one by hand.
public struct BusymateNotification: Sendable, Equatable {
    public static let magic = "busymate/1"
    public static let maxSize = 2048

    public var name: NotificationName
    public var sender: String
    public var payload: String?

    public init(name: NotificationName, sender: String, payload: String? = nil) {
        self.name = name
        self.sender = sender
        self.payload = payload
    }

    public enum DecodeError: Error, Equatable {
        case tooLarge(Int)
        case notUTF8
        case badHeader
        case unknownName(String)
    }

    public func encoded() -> [UInt8] {
        var line = "\(Self.magic) \(name.rawValue) \(sender)"
        if let payload, !payload.isEmpty {
            line += " " + payload.replacingOccurrences(of: "\n", with: " ")
        }
        var bytes = Array(line.utf8)
        if bytes.count > Self.maxSize {
            // Cut before a character's first byte: the datagram stays UTF-8.
            var end = Self.maxSize
            while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
            bytes.removeSubrange(end...)
        }
        return bytes
    }

    public static func decode<Bytes: Collection>(_ bytes: Bytes) throws(DecodeError) -> BusymateNotification where Bytes.Element == UInt8 {
        guard bytes.count <= maxSize else { throw .tooLarge(bytes.count) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .notUTF8 }
        // At the byte: split by Characters, a space followed by a combining
        // mark would be no separator.
        let parts = text.utf8.split(separator: UInt8(ascii: " "), maxSplits: 3, omittingEmptySubsequences: false).map {
            String(Substring($0))
        }
        guard parts.count >= 3, parts[0] == magic, !parts[2].isEmpty else { throw .badHeader }
        guard let name = NotificationName(rawValue: parts[1]) else { throw .unknownName(parts[1]) }
        let payload = parts.count == 4 ? parts[3] : nil
        return BusymateNotification(name: name, sender: parts[2], payload: payload)
    }
}
