import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// What the DNS forwarder saw of one query.
struct DNSExchange: Sendable {
    var startedAt: Date
    var endedAt: Date
    var client: SocketAddress?
    var server: String?
    var name: String
    var type: String
    var transport: String
    var rcode: UInt8?
    var answers: [String]
    var error: String?
}
