import Foundation
import Glibc
import NIOCore
import NIOPosix
import Synchronization

struct DNSLookupError: Error, CustomStringConvertible {
    var host: String
    var reason: String
    var description: String { "\(host): \(reason)" }
}
