import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Glibc

struct DNSLookupError: Error, CustomStringConvertible {
    var host: String
    var reason: String
    var description: String { "\(host): \(reason)" }
}
