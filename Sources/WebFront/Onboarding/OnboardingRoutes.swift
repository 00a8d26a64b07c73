import BusymateShared
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The onboarding listener's pages: what a device needs to use the proxy
/// (the seed's PAC mode) and to trust the CA. No token is asked here and
/// nothing else is served: not the page, not the API.
struct OnboardingRoutes {
    let paths: GroupPaths
    let settings: OnboardingSettings
    let log: OnboardingLogWriter
    private let refusals = PACRefusalLog()
    private var desk: EnrolmentDesk { EnrolmentDesk(paths: paths) }

    func router() -> Router<OnboardingContext> {
        let router = Router(context: OnboardingContext.self)
        router.get("/proxy.pac") { _, context in
            let settings = settings.current
            guard let proxy = Self.proxy(for: context.localAddress, in: settings) else {
                // Refused, not DIRECT: a device told to go direct would bypass capture unseen.
                let reached = Self.reached(context.localAddress) ?? "this address"
                refusals.refused(client: Self.clientIP(context), reason: settings.noProxyListener(at: reached), now: Date().timeIntervalSince1970)
                return Self.response(.serviceUnavailable, type: "text/plain; charset=utf-8", body: Data((Self.refusal(reached) + "\n").utf8))
            }
            if let client = Self.counted(context, settings) { await log.count(.pac, by: client) }
            return Self.response(.ok, type: "application/x-ns-proxy-autoconfig", body: Data(Self.pac(proxy: proxy, for: Self.clientIP(context)).utf8))
        }
        router.get("/enrol/:token") { _, context in
            let token = context.parameters.get("token") ?? ""
            guard let client = Self.clientIP(context) else { return Self.page(.badRequest, EnrolmentPage.refused(title: "No address", why: "This connection has no IP address.")) }
            switch desk.open(token: token, client: client) {
            case let .admitted(device):
                // The new grant counts this device's downloads from now on.
                await settings.reload()
                var response = Self.response(.seeOther, type: "text/plain; charset=utf-8", body: Data("enrolled as \(device)\n".utf8))
                response.headers[.location] = "/device/\(device)"
                return response
            case .unknown:
                return Self.page(.notFound, EnrolmentPage.refused(title: "Unknown enrolment link", why: "This link was never issued here, or a newer link for the device replaced it."))
            case let .revoked(device):
                return Self.page(.gone, EnrolmentPage.refused(title: "Enrolment link revoked", why: "The link for \(device) was revoked: it admits no device any more."))
            case let .expired(device):
                return Self.page(.gone, EnrolmentPage.refused(title: "Enrolment link expired", why: "The link for \(device) expired before this device opened it."))
            case let .usedElsewhere(device):
                return Self.page(.forbidden, EnrolmentPage.refused(title: "Enrolment link already used",
                                                                    why: "Another device opened the link for \(device) first: a link enrols one device, from one address."))
            case let .unavailable(why):
                return Self.page(.serviceUnavailable, EnrolmentPage.refused(title: "Enrolment unavailable", why: "The appliance could not record the enrolment: \(why)"))
            }
        }
        router.get("/device/:name") { _, context in
            let settings = settings.current
            guard let name = context.parameters.get("name"), let device = settings.devices.named(name),
                  let client = Self.clientIP(context), let by = device.enrolment?.redeemedBy, IPAddressText.canonical(by) == IPAddressText.canonical(client)
            else {
                return Self.page(.forbidden, EnrolmentPage.refused(title: "Not this device's page",
                                                                    why: "A device's page is shown only to the device enrolled under that name, from its address."))
            }
            let reached = context.localAddress.map(Self.authority) ?? "this-machine"
            let seen = TunnelStatus.read(paths.status)?.devices ?? []
            let row = DeviceRow.merge(settings: settings, seen: seen, onboarding: OnboardingLog.read(paths.onboarding), exchangesToday: [:]).first { $0.name == name }
            let proxy = Self.proxy(for: context.localAddress, device: device, in: settings)
            let refused = proxy == nil ? Self.refusal(Self.reached(context.localAddress) ?? "this address") : nil
            return Self.page(.ok, EnrolmentPage.device(name: name, pacURL: "http://\(reached)/device/\(name)/proxy.pac", caURL: "http://\(reached)/ca.pem",
                                                       derURL: "http://\(reached)/ca.der", proxy: proxy, row: row, pacRefused: refused))
        }
        router.get("/device/:name/proxy.pac") { _, context in
            let settings = settings.current
            guard let name = context.parameters.get("name"), let device = settings.devices.named(name) else {
                return Self.response(.notFound, type: "text/plain; charset=utf-8", body: Data("Busymate: no device of that name\n".utf8))
            }
            guard let proxy = Self.proxy(for: context.localAddress, device: device, in: settings) else {
                let reached = Self.reached(context.localAddress) ?? "this address"
                refusals.refused(client: Self.clientIP(context), reason: settings.noProxyListener(at: reached), now: Date().timeIntervalSince1970)
                return Self.response(.serviceUnavailable, type: "text/plain; charset=utf-8", body: Data((Self.refusal(reached) + "\n").utf8))
            }
            if let client = Self.counted(context, settings) { await log.count(.pac, by: client) }
            return Self.response(.ok, type: "application/x-ns-proxy-autoconfig", body: Data(Self.pac(proxy: proxy, for: Self.clientIP(context), device: name).utf8))
        }
        router.get("/ca.pem") { _, context in try await ca(paths.caPEM, name: "busymate-ca.pem", context: context) }
        router.get("/ca.der") { _, context in try await ca(paths.caDER, name: "busymate-ca.der", context: context) }
        router.get("/") { _, context in
            let settings = settings.current
            let reached = context.localAddress.map(Self.authority) ?? "this-machine"
            let proxy = Self.proxy(for: context.localAddress, in: settings)
            let refused = proxy == nil ? Self.refusal(Self.reached(context.localAddress) ?? "this address") : nil
            let page = OnboardingPage.html(pacURL: "http://\(reached)/proxy.pac", caURL: "http://\(reached)/ca.pem",
                                           proxy: proxy, transparent: settings.mode == .transparent, pacRefused: refused)
            return Self.response(.ok, type: "text/html; charset=utf-8", body: Data(page.utf8))
        }
        return router
    }

    private func ca(_ file: URL, name: String, context: OnboardingContext) async throws -> Response {
        guard let data = try? GroupFileReader.read(file, limit: 1 << 20) else {
            return Self.response(.serviceUnavailable, type: "text/plain; charset=utf-8", body: Data("the CA is not there yet\n".utf8))
        }
        if let client = Self.counted(context, settings.current) { await log.count(.ca, by: client) }
        var response = Self.response(.ok, type: "application/x-x509-ca-cert", body: data)
        response.headers[.contentDisposition] = "attachment; filename=\"\(name)\""
        return response
    }

    /// The proxy listener a device that reached `local` can use (named by
    /// the address reached), or nil when none serves that address.
    static func proxy(for local: SocketAddress?, in settings: AppSettings) -> String? {
        guard let host = reached(local), let listener = settings.proxyListener(serving: host) else { return nil }
        return host.contains(":") ? "[\(host)]:\(listener.port)" : "\(host):\(listener.port)"
    }

    /// A named device's proxy: its own port (when device ports serve the
    /// address it reached), else the proxy listener there.
    static func proxy(for local: SocketAddress?, device: AppSettings.NamedDevice, in settings: AppSettings) -> String? {
        guard let port = device.port else { return proxy(for: local, in: settings) }
        guard let host = reached(local), settings.devicePortsServe(host) else { return nil }
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    static func page(_ status: HTTPResponse.Status, _ html: String) -> Response {
        response(status, type: "text/html; charset=utf-8", body: Data(html.utf8))
    }

    /// What a device is told: why, not the appliance's listeners (its
    /// `status` and log say what to add).
    static func refusal(_ reached: String) -> String {
        "Busymate: no proxy listener serves \(reached), the address this device reached, so no PAC is served here "
            + "(one answering DIRECT would send this device's traffic around the proxy); `busymate status` on the appliance says what to add to proxy.listen"
    }

    /// The address a device reached, IPv4-mapped ones as IPv4.
    static func reached(_ local: SocketAddress?) -> String? {
        guard let ip = local?.ipAddress else { return nil }
        return ip.hasPrefix("::ffff:") && ip.contains(".") ? String(ip.dropFirst(7)) : ip
    }

    /// A PAC file: the proxy, falling back to going direct only if it is
    /// down (a phone should not lose the network because the appliance did).
    static func pac(proxy: String, for client: String?, device: String? = nil) -> String {
        """
            // Busymate proxy auto-configuration\(device.map { " for device \($0)" } ?? "")\(client.map { " (served to \($0))" } ?? "")
            // Everything but local names goes through the proxy.
            function FindProxyForURL(url, host) {
              if (isPlainHostName(host) || host === "localhost" || host === "127.0.0.1" || host === "[::1]") return "DIRECT";
              return "PROXY \(proxy); DIRECT";
            }

            """
    }

    static func authority(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "this-machine" }
        let host = ip.hasPrefix("::ffff:") && ip.contains(".") ? String(ip.dropFirst(7)) : ip
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// The client, when it is one the proxy would take: anyone may fetch the
    /// CA, but only devices that may use the proxy are counted (and listed).
    static func counted(_ context: OnboardingContext, _ settings: AppSettings) -> String? {
        guard let ip = clientIP(context), IPNetwork.isLoopback(ip) || settings.access.admits(ip) else { return nil }
        return ip
    }

    static func clientIP(_ context: OnboardingContext) -> String? {
        guard let ip = context.remoteAddress?.ipAddress else { return nil }
        return ip.hasPrefix("::ffff:") && ip.contains(".") ? String(ip.dropFirst(7)) : ip
    }

    static func response(_ status: HTTPResponse.Status, type: String, body: Data) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        headers[.xContentTypeOptions] = "nosniff"
        headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
        headers[.referrerPolicy] = "no-referrer"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
