import CaptureStore
import NIOCore

/// How a connection arrived (DESIGN: front ends): the explicit proxy, the
/// nftables redirect, or a named device's own port.
public enum FrontEnd: Sendable, Hashable {
    case explicit
    case transparent
    case device(String)

    /// The store's `front_end` and `devices`' source.
    var name: String {
        switch self {
        case .explicit: return "proxy"
        case .transparent: return "transparent"
        case .device: return "port"
        }
    }
}

/// Who sent a connection's traffic, stamped on each of its rows.
struct CapturePeer: Sendable, Equatable {
    /// A named device, else the client's address.
    var device: String?
    var frontEnd: String?
    /// The client connection (`connection_id`), and its HTTP/2 stream.
    var connectionID: String?
    var streamID: Int?

    static let unknown = CapturePeer(device: nil, frontEnd: nil)

    /// Puts who and how on a row.
    func stamp(_ record: inout ExchangeRecord) {
        (record.device, record.frontEnd) = (device, frontEnd)
        (record.connectionID, record.streamID) = (connectionID, streamID)
    }
}
