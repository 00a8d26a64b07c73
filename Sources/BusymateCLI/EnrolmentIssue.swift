import BusymateShared
import CaptureStore
import Foundation
import NIOCore

/// An enrolment link for a named device: written (only the token's digest)
/// into its `devices.list[]` entry, printed once with a QR code.
enum EnrolmentIssue {
    struct Issued {
        var name: String
        var token: String
        var expires: Date
        /// The address the previous link admitted, no longer admitted.
        var ended: String?
    }

    /// `--link-ttl` / `--ttl`: seconds, or 30m, 24h, 7d.
    static func lifetime(_ text: String, option: String) throws -> Double {
        do {
            return try AppSettings.duration(text, path: option)
        } catch {
            throw CLIError(description: "\(option) \(text): \(error.message)")
        }
    }

    /// The onboarding listener as devices reach it, from the supervisor's
    /// report (the bound port), else from the settings.
    static func authority(_ paths: GroupPaths, host: String?) throws -> (authority: String, loopbackOnly: Bool) {
        let settings = try SettingsEdit.current(paths).settings
        let report = try? ControlClient.request(ControlMessage(.status), paths: paths).report
        guard let configured = settings.onboardingListen else {
            throw CLIError(description: "no onboarding listener (onboarding.listen in settings.json): devices have nowhere to open a link")
        }
        var bound = report?.web?.onboarding?.bound.flatMap(ListenAddress.init) ?? configured
        if bound.port == 0 {
            throw CLIError(description: "the onboarding listener (\(configured)) is not bound yet: is the appliance running?")
        }
        if let host {
            guard IPAddressText.isLiteral(host) || isHostName(host) else {
                throw CLIError(description: "--host \(host): not an address or a host name")
            }
            bound.host = host
            return (
                host.contains(":") ? "[\(host)]:\(bound.port)" : "\(host):\(bound.port)",
                host == "localhost" || (IPAddressText.isLiteral(host) && IPNetwork.isLoopback(host))
            )
        }
        let interfaces = ((try? System.enumerateDevices()) ?? []).compactMap { $0.address?.ipAddress }
        return EnrolmentLink.authority(bound: bound, interfaces: interfaces)
    }

    static func isHostName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 253
            && text.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
    }

    /// The link, its QR code and what opening it does.
    static func text(_ issued: Issued, authority: (authority: String, loopbackOnly: Bool)) -> String {
        let url = EnrolmentLink.url(authority: authority.authority, token: issued.token)
        let until = ISO8601DateFormatter().string(from: issued.expires)
        var lines = [
            "enrolment link for \(issued.name) (one device; until \(until); busymate devices revoke \(issued.name) withdraws it):",
            "  \(url)",
        ]
        if let qr = try? QRCode.encode(url, correction: .low) { lines.append(qr.terminal()) }
        lines.append(
            "Open it on the device, or scan the code: the device is admitted, named \(issued.name), and offered its PAC, the CA and its setup steps."
        )
        if let ended = issued.ended {
            lines.append("The previous link's admission of \(ended) ended: open this one on the device to enrol it again.")
        }
        if authority.loopbackOnly {
            lines.append(
                "warning: the onboarding listener is on loopback only: other machines cannot open this link (onboarding.listen in settings.json, or --host)"
            )
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ issued: Issued, port: Int?, authority: (authority: String, loopbackOnly: Bool)) -> JSONNode {
        ExchangeJSON.object([
            ("name", ExchangeJSON.string(issued.name)), ("port", ExchangeJSON.number(port)),
            ("link", ExchangeJSON.string(EnrolmentLink.url(authority: authority.authority, token: issued.token))),
            ("expires", ExchangeJSON.date(issued.expires)), ("loopback_only", ExchangeJSON.bool(authority.loopbackOnly)),
        ])
    }
}
