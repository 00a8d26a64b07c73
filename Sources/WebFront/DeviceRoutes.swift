import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import NIOCore
import NIOPosix

/// The Devices view's actions, as `busymate devices add`, `link` and
/// `revoke` do them: `POST /api/devices` with `{"name": "…"}` names a
/// device and gives it an enrolment link; `POST /api/devices/:name/link`
/// replaces its link; `POST /api/devices/:name/revoke` withdraws it. A
/// link is shown once (only its digest is kept), with its QR code.
struct DeviceRoutes<Context: RequestContext> {
    let paths: GroupPaths
    /// The onboarding listener's bound address (`host:port`), if any.
    let onboarding: String?

    func register(on router: Router<Context>) {
        router.post("/api/devices") { request, _ in
            guard let sent = try await WebJSON.body(request, limit: 4 << 10), case let .object(members) = sent.value,
                let nameNode = members.first(where: { $0.key == "name" })?.node, case let .string(name) = nameNode.value
            else { return WebJSON.error(.badRequest, #"expected {"name": "…"}"#) }
            if let refused = WebJSON.unknownKey(sent, allowed: ["name"], in: "a new device") { return refused }
            guard let authority = await authority(reachedAs: request.head.authority) else { return noListener() }
            let result = await edit { root -> Issued? in
                let (device, existed) = try DeviceList.add(name, address: nil, in: &root)
                guard !existed else { return nil }
                let link = try DeviceList.issueLink(name, lifetime: AppSettings.Enrolment.linkLifetime, in: &root)
                return Issued(device: device, token: link.token, expires: link.expires)
            }
            switch result {
            case let .failure(refused): return refused.response
            case .success(nil): return WebJSON.error(.conflict, "\(name) is already added: give it a new link instead")
            case let .success(issued?): return WebJSON.response(Self.link(issued, authority: authority), status: .created)
            }
        }
        router.post("/api/devices/:name/link") { request, context in
            guard let name = context.parameters.get("name") else { return WebJSON.error(.badRequest, "no device name") }
            guard let authority = await authority(reachedAs: request.head.authority) else { return noListener() }
            let result = await edit { root -> Issued? in
                let link = try DeviceList.issueLink(name, lifetime: AppSettings.Enrolment.linkLifetime, in: &root)
                return try AppSettings.decode(root).settings.devices.named(name).map {
                    Issued(device: $0, token: link.token, expires: link.expires, ended: link.ended)
                }
            }
            switch result {
            case let .failure(refused): return refused.response
            case .success(nil): return WebJSON.error(.notFound, "no device named \(name)")
            case let .success(issued?): return WebJSON.response(Self.link(issued, authority: authority))
            }
        }
        router.post("/api/devices/:name/revoke") { _, context in
            guard let name = context.parameters.get("name") else { return WebJSON.error(.badRequest, "no device name") }
            switch await edit({ root in try DeviceList.revoke(name, in: &root) }) {
            case let .failure(refused): return refused.response
            case let .success(ended):
                return WebJSON.ok([
                    ("name", ExchangeJSON.string(name)), ("revoked", ExchangeJSON.bool(true)),
                    ("no_longer_admitted", ExchangeJSON.string(ended)),
                ])
            }
        }
    }

    struct Issued: Sendable {
        var device: AppSettings.NamedDevice
        var token: String
        var expires: Date
        var ended: String?
    }

    struct Refused: Error {
        var response: Response
    }

    /// The edit on the thread pool (a lock, a read, a write), announced; a
    /// refusal or a file that does not parse is the page's error.
    private func edit<T: Sendable>(_ change: @escaping @Sendable (inout JSONNode) throws -> T) async -> Result<T, Refused> {
        let paths = self.paths
        let outcome: Result<T, Refused>
        do {
            outcome = .success(
                try await NIOThreadPool.singleton.runIfActive { () throws -> T in
                    var out: T?
                    try SettingsFile.edit(paths.settings) { root in out = try change(&root) }
                    guard let out else { throw DeviceList.Refusal("settings.json was not edited") }
                    return out
                })
        } catch let refusal as DeviceList.Refusal {
            outcome = .failure(
                Refused(
                    response: WebJSON.error(
                        refusal.description.hasPrefix("no device") ? .notFound : .unprocessableContent, refusal.description)))
        } catch {
            outcome = .failure(Refused(response: WebJSON.error(.conflict, "settings.json: \(error)")))
        }
        if case .success = outcome, let notifier = try? Notifier(paths: paths, role: "web-edit") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
        return outcome
    }

    private func noListener() -> Response {
        WebJSON.error(.conflict, "no onboarding listener (onboarding.listen in settings.json): devices have nowhere to open a link")
    }

    /// Where devices reach the onboarding listener. Bound on every address:
    /// the address the administrator reached this page by, when it is one
    /// of that family off loopback (the network devices share), else the
    /// interfaces', read on the thread pool (it blocks).
    private func authority(reachedAs host: String?) async -> (authority: String, loopbackOnly: Bool)? {
        guard let onboarding, var bound = ListenAddress(onboarding) else { return nil }
        if bound.isWildcard, let host, let reached = Self.hostPart(host), IPAddressText.isLiteral(reached),
            reached.contains(":") == bound.host.contains(":"), !IPNetwork.isLoopback(reached)
        {
            bound.host = reached
            return EnrolmentLink.authority(bound: bound, interfaces: [])
        }
        let interfaces =
            (try? await NIOThreadPool.singleton.runIfActive {
                ((try? System.enumerateDevices()) ?? []).compactMap { $0.address?.ipAddress }
            }) ?? []
        return EnrolmentLink.authority(bound: bound, interfaces: interfaces)
    }

    /// `192.0.2.1:9091` → `192.0.2.1`, `[fd00::1]:9091` → `fd00::1`.
    static func hostPart(_ authority: String) -> String? {
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<end])
        }
        return authority.split(separator: ":", maxSplits: 1).first.map(String.init)
    }

    static func link(_ issued: Issued, authority: (authority: String, loopbackOnly: Bool)) -> JSONNode {
        let device = issued.device
        let url = EnrolmentLink.url(authority: authority.authority, token: issued.token)
        let qr =
            (try? QRCode.encode(url, correction: .medium).svg(quietZone: 4, label: "QR code of the enrolment link for \(device.name)"))
            ?? ""
        return ExchangeJSON.object([
            ("name", ExchangeJSON.string(device.name)), ("port", ExchangeJSON.number(device.port)), ("link", ExchangeJSON.string(url)),
            ("expires", ExchangeJSON.date(issued.expires)), ("qr_svg", ExchangeJSON.string(qr)),
            ("loopback_only", ExchangeJSON.bool(authority.loopbackOnly)),
            ("no_longer_admitted", ExchangeJSON.string(issued.ended)),
        ])
    }
}
