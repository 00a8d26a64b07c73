import BusymateShared
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix

struct UpstreamProxyRefusal: Error, CustomStringConvertible {
    var description: String
}
