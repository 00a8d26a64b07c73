import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

/// A failed accept or child set-up only shows as an error on the server
/// channel; say so instead of losing it, at most once per 10 s (with how
/// many were left unsaid), as a flood of them is what it reports.
final class AcceptErrorLogger: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    private let logger = Logger(label: "busymate.proxy")
    private var lastLogged: NIODeadline?
    private var unsaid = 0
    static let interval = TimeAmount.seconds(10)

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let now = NIODeadline.now()
        if let last = lastLogged, now - last < Self.interval {
            unsaid += 1
            return
        }
        var metadata: Logger.Metadata = ["ERROR": "\(error)"]
        if unsaid > 0 { metadata["SINCE_LAST"] = "\(unsaid) more" }
        logger.error("cannot accept a connection", metadata: metadata)
        lastLogged = now
        unsaid = 0
    }
}
