import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS

/// Sits right behind the TLS server handler of an intercepted tunnel and
/// watches the handshake. A client that refuses our leaf (an `unknown_ca`,
/// `bad_certificate` or `certificate_unknown` alert, or a hang-up mid-
/// handshake) may have pinned its server; `Interception.refused` weighs the
/// evidence before the host is passed through. After the handshake it leaves.
final class MITMHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private enum State { case handshaking, done }
    private var state = State.handshaking
    private let target: ProxyTarget
    private var host: String { target.host }
    /// Interception (to pin a refusing host), hooks (a refused handshake's row), logger, timeouts.
    private let services: ProxyServices
    private var logger: Logger { services.logger }
    private let hooks: ExchangeHooks
    /// The client's SNI, for the row of a failed handshake.
    var sni: String?

    /// The client's handshake must end within `timeouts.tls_handshake_seconds`.
    private var handshakeTimeout: Double { services.timeouts.tlsHandshake }
    private var handshakeTimer: Scheduled<Void>?

    init(target: ProxyTarget, services: ProxyServices) {
        self.target = target
        self.services = services
        hooks = ExchangeHooks(services: services)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        handshakeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(handshakeTimeout * 1000))) { [self] in
            self.handshakeTimedOut(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        handshakeTimer?.cancel()
        handshakeTimer = nil
    }

    /// Our own hang-up is no refusal of the certificate: no pin, one row.
    private func handshakeTimedOut(context: ChannelHandlerContext) {
        guard state == .handshaking else { return }
        state = .done
        let why =
            "the client's TLS handshake did not finish within \(TimeoutWords.format(handshakeTimeout)) s (timeouts.tls_handshake_seconds)"
        logger.notice("closed a TLS handshake that did not finish", metadata: ["HOST": "\(host)", "WHY": "\(why)"])
        hooks.handshakeRefused(target, sni: sni, client: context.channel.remoteAddress, why: why)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            handshakeTimer?.cancel()
            handshakeTimer = nil
            state = .done
            logger.debug("client handshake done", metadata: ["HOST": "\(host)"])
            services.interception.noteTrusted(client: context.channel.remoteAddress?.ipAddress, host: host)
            services.devices?.trusted(services.peer)
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if state == .handshaking {
            state = .done
            // A failed handshake is a failed exchange: one row with the error, saying what follows.
            let why: String
            if let rejection = Self.rejection(error) {
                let outcome = services.interception.refused(host, reason: rejection, client: context.channel.remoteAddress?.ipAddress)
                // A refusal that pins (or re-pins) the host: its pin goes to the store through the capture sink.
                if case .pinned = outcome { hooks.hostPinned(host, reason: rejection) }
                why = Self.explain(rejection, host: host, outcome, caFile: services.interception.caFile)
            } else {
                why = "TLS handshake with the client failed: \(ProxyError.describeTLS(error))"
            }
            hooks.handshakeRefused(target, sni: sni, client: context.channel.remoteAddress, why: why)
        }
        context.fireErrorCaught(error)
    }

    /// The row's error for a refused certificate: what happened, what
    /// Busymate does about it, and how to change that.
    static func explain(_ rejection: String, host: String, _ outcome: Interception.PinOutcome, caFile: String?) -> String {
        let refused = "the client refused the interception certificate (\(rejection))"
        let ca = caFile ?? "<group directory>/ca.pem"
        let trust =
            "To have it decrypted, make that client trust Busymate's CA: `curl --cacert \(ca)`, "
            + "`busymate ca export` for a system or browser store, or a device's onboarding page (/ca.pem)"
        switch outcome {
        case let .pinned(until):
            let hours = until.timeIntervalSinceNow / 3600
            let span = hours >= 1 ? String(format: "%.0f h", hours) : String(format: "%.0f min", max(1, hours * 60))
            return
                "\(refused) again, though it trusts our CA for other hosts: certificate pinning. \(host) is passed through undecrypted for \(span) "
                + "(ssl_proxying.pin_ttl); `busymate pinned remove \(host)` intercepts it again"
        case .clientDoesNotTrustUs:
            return "\(refused): it has not trusted our CA for other hosts lately, so it most likely lacks it. Not pinned. \(trust)"
        case .loopbackClient:
            return
                "\(refused). Not pinned: it runs on this machine, where every process shares the address (ssl_proxying.pin_loopback). \(trust)"
        case .firstRefusal:
            return "\(refused), though it trusts our CA for other hosts. Not pinned yet: if it refuses \(host) again within "
                + "\(Int(PinEvidence.window / 60)) min, that is certificate pinning and the host is passed through. \(trust)"
        case .autoPinOff:
            return "\(refused); ssl_proxying.auto_pin is off, so the host stays intercepted. \(trust)"
        }
    }

    /// Why `error` means the client refused our certificate, if it does.
    static func rejection(_ error: Error) -> String? {
        guard let tls = error as? NIOSSLError else { return nil }
        let text = "\(tls)".uppercased()
        for alert in ["ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_UNKNOWN"] where text.contains(alert) {
            return alert.lowercased().replacingOccurrences(of: "alert_", with: "")
        }
        // In TLS 1.3 a client that refuses the certificate before switching
        // its own keys (OpenSSL does) sends the alert in plaintext, which
        // BoringSSL, already expecting encrypted records, cannot read.
        if text.contains("DECRYPTION_FAILED_OR_BAD_RECORD_MAC") || text.contains("BAD_PACKET_LENGTH") {
            return "aborted the handshake (an alert sent before its key change)"
        }
        if case .uncleanShutdown = tls { return "closed during the handshake" }
        return nil
    }
}
