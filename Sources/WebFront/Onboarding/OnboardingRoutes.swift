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
    let desk: EnrolmentDesk

    func router() -> Router<OnboardingContext> {
        let router = Router(context: OnboardingContext.self)
        router.get("/proxy.pac") { _, context in
            let settings = settings.current
            guard let proxy = Self.proxy(for: context.localAddress, in: settings) else {
                // Refused, not DIRECT: a device told to go direct would bypass capture unseen.
                let reached = Self.reached(context.localAddress) ?? "this address"
                refusals.refused(
                    client: Self.clientIP(context), reason: settings.noProxyListener(at: reached), now: Date().timeIntervalSince1970)
                return Self.response(
                    .serviceUnavailable, type: "text/plain; charset=utf-8", body: Data((Self.refusal(reached) + "\n").utf8))
            }
            if let client = Self.counted(context, settings) { await log.count(.pac, by: client) }
            return Self.response(
                .ok, type: "application/x-ns-proxy-autoconfig",
                body: Data(Self.pac(proxy: proxy, for: Self.clientIP(context), direct: Self.reached(context.localAddress)).utf8))
        }
        // GET shows what the link is for and asks the device to confirm; only
        // the POST admits it (a chat app's preview of the link must not use it up).
        router.get("/enrol/:token") { _, context in
            let token = context.parameters.get("token") ?? ""
            if let refused = Self.notADevice(context) { return refused }
            guard let client = Self.clientIP(context) else {
                return Self.page(.badRequest, EnrolmentPage.refused(title: "No address", why: "This connection has no IP address."))
            }
            switch desk.check(token: token, client: client, settings: settings.current) {
            case let .admissible(device, first) where first:
                return Self.page(.ok, EnrolmentPage.confirm(device: device, action: "/enrol/\(token)"))
            case let .admissible(device, _):
                // The device it enrolled, again: admitted again at once if its grant lapsed or is
                // old, else only sent to its page (re-opening writes nothing).
                let fresh = Date().addingTimeInterval(AppSettings.Enrolment.admission - AppSettings.Enrolment.renewalStep)
                if let until = DeviceList.exactGrant(client, in: settings.current.access), until >= fresh {
                    return Self.seeOther("/device/\(device)")
                }
                return await enrol(token: token, client: client)
            case let outcome:
                return Self.refusalPage(outcome)
            }
        }
        router.post("/enrol/:token") { request, context in
            let token = context.parameters.get("token") ?? ""
            if let refused = Self.notADevice(context) { return refused }
            if let refused = Self.crossSite(request) { return refused }
            guard let client = Self.clientIP(context) else {
                return Self.page(.badRequest, EnrolmentPage.refused(title: "No address", why: "This connection has no IP address."))
            }
            let outcome = desk.check(token: token, client: client, settings: settings.current)
            guard case .admissible = outcome else { return Self.refusalPage(outcome) }
            return await enrol(token: token, client: client)
        }
        router.get("/device/:name") { _, context in
            let settings = settings.current
            guard let name = context.parameters.get("name"), let device = settings.devices.named(name),
                let client = Self.clientIP(context), let enrolment = device.enrolment, !enrolment.revoked, let by = enrolment.redeemedBy,
                IPAddressText.host(by) == IPAddressText.host(client)
            else {
                return Self.page(
                    .forbidden,
                    EnrolmentPage.refused(
                        title: "Not this device's page",
                        why: "A device's page is shown only to the device enrolled under that name, from its address."))
            }
            let reached = context.localAddress.map(Self.authority) ?? "this-machine"
            let seen = TunnelStatus.read(paths.status)?.devices ?? []
            let row = DeviceRow.merge(settings: settings, seen: seen, onboarding: OnboardingLog.read(paths.onboarding), exchangesToday: [:])
                .first { $0.name == name }
            let proxy = Self.proxy(for: context.localAddress, device: device, in: settings)
            let refused = proxy == nil ? Self.refusal(Self.reached(context.localAddress) ?? "this address") : nil
            return Self.page(
                .ok,
                EnrolmentPage.device(
                    name: name, pacURL: "http://\(reached)/device/\(name)/proxy.pac", caURL: "http://\(reached)/ca.pem",
                    derURL: "http://\(reached)/ca.der", proxy: proxy, row: row, pacRefused: refused))
        }
        router.get("/device/:name/proxy.pac") { _, context in
            let settings = settings.current
            // Only to the device itself (its bound address): names and ports are not told to the LAN.
            guard let name = context.parameters.get("name"), let device = settings.devices.named(name), let client = Self.clientIP(context),
                device.address.map(IPAddressText.host) == IPAddressText.host(client),
                device.enrolment.map({ !$0.revoked && $0.redeemedBy.map(IPAddressText.host) == IPAddressText.host(client) }) ?? true
            else {
                return Self.response(
                    .notFound, type: "text/plain; charset=utf-8",
                    body: Data("Busymate: no PAC for this device here (open its enrolment link first)\n".utf8))
            }
            guard let proxy = Self.proxy(for: context.localAddress, device: device, in: settings) else {
                let reached = Self.reached(context.localAddress) ?? "this address"
                refusals.refused(
                    client: Self.clientIP(context), reason: settings.noProxyListener(at: reached), now: Date().timeIntervalSince1970)
                return Self.response(
                    .serviceUnavailable, type: "text/plain; charset=utf-8", body: Data((Self.refusal(reached) + "\n").utf8))
            }
            if let client = Self.counted(context, settings) { await log.count(.pac, by: client) }
            return Self.response(
                .ok, type: "application/x-ns-proxy-autoconfig",
                body: Data(Self.pac(proxy: proxy, for: client, device: name, direct: Self.reached(context.localAddress)).utf8))
        }
        router.get("/ca.pem") { _, context in try await ca(paths.caPEM, name: "busymate-ca.pem", context: context) }
        router.get("/ca.der") { _, context in try await ca(paths.caDER, name: "busymate-ca.der", context: context) }
        router.get("/") { _, context in
            let settings = settings.current
            let reached = context.localAddress.map(Self.authority) ?? "this-machine"
            let proxy = Self.proxy(for: context.localAddress, in: settings)
            let refused = proxy == nil ? Self.refusal(Self.reached(context.localAddress) ?? "this address") : nil
            let page = OnboardingPage.html(
                pacURL: "http://\(reached)/proxy.pac", caURL: "http://\(reached)/ca.pem",
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

    private func enrol(token: String, client: String) async -> Response {
        let outcome = await desk.admit(token: token, client: client)
        guard case let .admitted(device) = outcome else { return Self.refusalPage(outcome) }
        // The new grant counts this device's downloads from now on.
        await settings.reload()
        return Self.seeOther("/device/\(device)")
    }

    static func seeOther(_ path: String) -> Response {
        var response = response(.seeOther, type: "text/plain; charset=utf-8", body: Data("see \(path)\n".utf8))
        response.headers[.location] = path
        return response
    }

    /// The confirm button is this listener's own form: a post from another
    /// site's page (which would enrol whoever views it) is refused.
    /// Browsers that send neither header are let through.
    static func crossSite(_ request: Request) -> Response? {
        let site = request.headers[.secFetchSite]
        let origin = request.headers[.origin]
        let ownOrigin = request.head.authority.map { "http://\($0)" }
        let sameSite = site.map { $0 == "same-origin" || $0 == "none" } ?? true
        let sameOrigin = origin.map { $0 == ownOrigin } ?? true
        guard !(sameSite && sameOrigin) else { return nil }
        return page(
            .forbidden,
            EnrolmentPage.refused(
                title: "Not from this page",
                why: "An enrolment is confirmed on the appliance's own page: open the link on the device itself."))
    }

    static func refusalPage(_ outcome: EnrolmentDesk.Outcome) -> Response {
        switch outcome {
        case let .revoked(device):
            return page(
                .gone,
                EnrolmentPage.refused(
                    title: "Enrolment link revoked", why: "The link for \(device) was revoked: it admits no device any more."))
        case let .expired(device):
            return page(
                .gone,
                EnrolmentPage.refused(title: "Enrolment link expired", why: "The link for \(device) expired before this device opened it."))
        case let .usedElsewhere(device):
            return page(
                .forbidden,
                EnrolmentPage.refused(
                    title: "Enrolment link already used",
                    why: "Another device opened the link for \(device) first: a link enrols one device, from one address."))
        case .unavailable:
            return page(
                .serviceUnavailable,
                EnrolmentPage.refused(
                    title: "Enrolment unavailable", why: "The appliance could not record the enrolment; try again in a moment."))
        case .unknown, .admissible, .admitted:
            return page(
                .notFound,
                EnrolmentPage.refused(
                    title: "Unknown enrolment link", why: "This link was never issued here, or a newer link for the device replaced it."))
        }
    }

    /// A request from the appliance itself: a device whose proxy is already
    /// set reaches these pages through the tunnel, and would enrol the
    /// appliance's address instead of its own.
    static func notADevice(_ context: OnboardingContext) -> Response? {
        guard let client = clientIP(context), let local = reached(context.localAddress) else { return nil }
        // On a loopback listener (this machine's own use) nothing tells them apart.
        guard !IPNetwork.isLoopback(local), IPAddressText.host(client) == IPAddressText.host(local) || IPNetwork.isLoopback(client) else {
            return nil
        }
        return page(
            .forbidden,
            EnrolmentPage.refused(
                title: "Opened through the proxy",
                why: "This request reached the appliance through its own proxy, so it would enrol the appliance instead of this device. "
                    + "Turn this device's proxy setting off, open the link again, then set the PAC the next page gives."))
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
    /// `direct`: the appliance's address the device reached, where its
    /// own pages are: fetched through the proxy they would come from the
    /// appliance, not from the device.
    static func pac(proxy: String, for client: String?, device: String? = nil, direct: String? = nil) -> String {
        let own = direct.map { host in " || host === \"\(host)\"" + (host.contains(":") ? " || host === \"[\(host)]\"" : "") } ?? ""
        return """
            // Busymate proxy auto-configuration\(device.map { " for device \($0)" } ?? "")\(client.map { " (served to \($0))" } ?? "")
            // Everything but local names goes through the proxy.
            function FindProxyForURL(url, host) {
              if (isPlainHostName(host) || host === "localhost" || host === "127.0.0.1" || host === "[::1]"\(own)) return "DIRECT";
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
