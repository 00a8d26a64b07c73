import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Glibc

/// A dial that would reach the proxy itself.
struct SelfLoopError: Error, CustomStringConvertible {
    var address: String
    var description: String { "\(address) is this proxy's own listening address; refusing to connect to itself (a loop)" }
}
