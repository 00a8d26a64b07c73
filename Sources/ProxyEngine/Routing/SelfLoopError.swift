import Foundation
import Glibc
import NIOCore
import NIOHTTP1
import Synchronization

/// A dial that would reach the proxy itself.
struct SelfLoopError: Error, CustomStringConvertible {
    var address: String
    var description: String { "\(address) is this proxy's own listening address; refusing to connect to itself (a loop)" }
}
