import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization

struct DNSForwardError: Error, CustomStringConvertible {
    var description: String
}
