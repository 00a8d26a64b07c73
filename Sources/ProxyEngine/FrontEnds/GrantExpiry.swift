import Foundation
import Logging
import NIOCore

/// A client that only a grant (`busymate allow IP --ttl`) let in: its
/// connection closes when the grant ends, as a new one would be refused
/// then; a keep-alive connection or a tunnel would otherwise outlive it.
/// It asks again at the end and at least every `recheck` (the grant may
/// have been extended or removed meanwhile). First in the pipeline, so it
/// closes whatever layers the connection has.
final class GrantExpiry: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    private let devices: DeviceRegistry
    private let ip: String
    private let logger: Logger
    private var until: Date
    private var check: Scheduled<Void>?

    static let recheck: TimeInterval = 5

    init(devices: DeviceRegistry, ip: String, until: Date, logger: Logger) {
        self.devices = devices
        self.ip = ip
        self.until = until
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) { schedule(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        context.fireChannelInactive()
    }

    private func schedule(context: ChannelHandlerContext) {
        let wait = min(max(0, until.timeIntervalSinceNow), Self.recheck)
        check = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(wait * 1000))) { [self] in
            check = nil
            guard context.channel.isActive else { return }
            switch devices.readmission(ip) {
            case .admitted:
                return
            case let .granted(until):
                self.until = until
                schedule(context: context)
            case .refused:
                logger.notice("the access grant for \(ip) ended; closed its connection", metadata: ["CLIENT": "\(ip)"])
                context.close(promise: nil)
            }
        }
    }
}
