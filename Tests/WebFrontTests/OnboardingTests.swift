import BusymateShared
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// The onboarding listener's pages and how the PAC file picks the proxy.
@Suite struct OnboardingTests {
    func settings(_ text: String) throws -> AppSettings { try AppSettings.decode(text).settings }

    @Test func thePACPointsAtTheProxyOnTheAddressReached() throws {
        let s = try settings("{\"proxy\": {\"listen\": [\"127.0.0.1:9090\", \"192.168.1.20:9090\", \"0.0.0.0:9191\", \"[::]:9292\"]}}")
        #expect(OnboardingRoutes.proxy(for: try SocketAddress(ipAddress: "192.168.1.20", port: 9092), in: s) == "192.168.1.20:9090")
        // Reached on another address: the wildcard listener, named by the address reached.
        #expect(OnboardingRoutes.proxy(for: try SocketAddress(ipAddress: "10.0.0.1", port: 9092), in: s) == "10.0.0.1:9191")
        #expect(OnboardingRoutes.proxy(for: try SocketAddress(ipAddress: "::ffff:10.0.0.1", port: 9092), in: s) == "10.0.0.1:9191")
        #expect(OnboardingRoutes.proxy(for: try SocketAddress(ipAddress: "fd00::1", port: 9092), in: s) == "[fd00::1]:9292")
        let loopbackOnly = try settings("{}")
        #expect(OnboardingRoutes.proxy(for: try SocketAddress(ipAddress: "192.168.1.20", port: 9092), in: loopbackOnly) == nil)
    }

    @Test func thePACFallsBackToDirectOnlyWhenTheProxyIsDown() {
        let pac = OnboardingRoutes.pac(proxy: "192.168.1.20:9090", for: "192.168.1.50")
        #expect(pac.contains("function FindProxyForURL(url, host)"))
        #expect(pac.contains("return \"PROXY 192.168.1.20:9090; DIRECT\";"))
        #expect(pac.contains("isPlainHostName(host)"))
    }

    /// Seed 004's pitfall: onboarding on the LAN, the proxy on loopback.
    @Test func statusWarnsWhenTheOnboardingListenerServesDevicesNoProxyCan() throws {
        let lanOnboarding = try settings("{\"onboarding\": {\"listen\": \"192.168.1.20:9092\"}}")
        let warning = try #require(lanOnboarding.onboardingWarning)
        #expect(
            warning.contains("192.168.1.20") && warning.contains("127.0.0.1:9090") && warning.contains("\"192.168.1.20:9090\"")
                && warning.contains("refused a PAC"))
        #expect(lanOnboarding.proxyListener(serving: "192.168.1.20") == nil)
        let everywhere = try settings("{\"onboarding\": {\"listen\": \"0.0.0.0:9092\"}}")
        #expect(everywhere.onboardingWarning?.contains("no proxy listener of its family is off loopback") == true)
        // IPv6 sockets are v6-only: an IPv4 listener serves no device on [::].
        let v6Everywhere = try settings("{\"proxy\": {\"listen\": [\"0.0.0.0:9090\"]}, \"onboarding\": {\"listen\": \"[::]:9092\"}}")
        #expect(v6Everywhere.onboardingWarning?.contains("\"[::]:9090\"") == true)
        // Transparent mode: devices route through the appliance and need no PAC.
        #expect(try settings("{\"mode\": \"transparent\", \"onboarding\": {\"listen\": \"192.168.1.20:9092\"}}").onboardingWarning == nil)
        // Addresses compare as addresses, not as text.
        let spelled = try settings("{\"proxy\": {\"listen\": [\"[FD00:0::1]:9090\", \"[::0]:9191\"]}}")
        #expect(spelled.proxyListener(serving: "fd00::1")?.port == 9090 && spelled.proxyListener(serving: "fd00::2")?.port == 9191)
        // Served: the same address, a wildcard of its family, or loopback for loopback.
        for served in [
            "{\"proxy\": {\"listen\": [\"192.168.1.20:9090\"]}, \"onboarding\": {\"listen\": \"192.168.1.20:9092\"}}",
            "{\"proxy\": {\"listen\": [\"0.0.0.0:9090\"]}, \"onboarding\": {\"listen\": \"192.168.1.20:9092\"}}",
            "{\"proxy\": {\"listen\": [\"127.0.0.1:9090\", \"192.168.1.20:9090\"]}, \"onboarding\": {\"listen\": \"0.0.0.0:9092\"}}",
            "{\"onboarding\": {\"listen\": \"127.0.0.1:9092\"}}", "{}",
        ] {
            #expect(try settings(served).onboardingWarning == nil, "\(served)")
        }
        let v6 = try settings("{\"proxy\": {\"listen\": [\"0.0.0.0:9090\"]}, \"onboarding\": {\"listen\": \"[fd00::1]:9092\"}}")
        #expect(v6.onboardingWarning?.contains("\"[::]:9090\"") == true)
    }

    @Test func theSetupPageSaysWhyThereIsNoPAC() {
        let page = OnboardingPage.html(
            pacURL: "http://192.168.1.20:9092/proxy.pac", caURL: "http://192.168.1.20:9092/ca.pem", proxy: nil, transparent: false,
            pacRefused: "no proxy listener is on 192.168.1.20 <b>")
        #expect(page.contains("class=\"card warn\"") && page.contains("no proxy listener is on 192.168.1.20 &lt;b&gt;"))
        #expect(!page.contains("QR code of http://192.168.1.20:9092/proxy.pac"))
        #expect(page.contains("href=\"http://192.168.1.20:9092/ca.pem\""))
        // In transparent mode that is no fault: the gateway captures.
        let gateway = OnboardingPage.html(
            pacURL: "http://192.168.1.20:9092/proxy.pac", caURL: "http://192.168.1.20:9092/ca.pem", proxy: nil, transparent: true,
            pacRefused: "no proxy listener")
        #expect(!gateway.contains("card warn") && gateway.contains("no proxy setting is needed"))
    }

    @Test func theSetupPageHasTheStepsAndAScannableURL() throws {
        let page = OnboardingPage.html(
            pacURL: "http://192.168.1.20:9092/proxy.pac", caURL: "http://192.168.1.20:9092/ca.pem",
            proxy: "192.168.1.20:9090", transparent: false)
        for system in ["Android", "iOS", "Linux", "Windows"] { #expect(page.contains("<h2>\(system)")) }
        #expect(page.contains("<svg") && page.contains("aria-label=\"QR code of http://192.168.1.20:9092/proxy.pac\""))
        #expect(page.contains("href=\"http://192.168.1.20:9092/ca.der\""))
        #expect(!page.contains("<script"))
        // What comes from outside is escaped.
        let hostile = OnboardingPage.html(
            pacURL: "http://x/<img src=x onerror=alert(1)>", caURL: "http://x/ca.pem", proxy: nil, transparent: true)
        #expect(!hostile.contains("<img") && hostile.contains("&lt;img src=x onerror=alert(1)&gt;") && hostile.contains("transparent mode"))
    }

    @Test func onlyTheOnboardingFilesAreServedAndCountedPerClient() async throws {
        let dir = URL(fileURLWithPath: "/tmp/bmonboard-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let paths = GroupPaths(root: dir)
        try Data("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8).write(to: paths.caPEM)
        try Data([0x30, 0x82, 0x01]).write(to: paths.caDER)
        try Data("{\"secret\": true}".utf8).write(to: paths.webToken)
        let routes = OnboardingRoutes(
            paths: paths, settings: OnboardingSettings(paths: paths, snapshot: SettingsFile.read(paths.settings)),
            log: OnboardingLogWriter(paths: paths), desk: EnrolmentDesk(paths: paths))
        try await Application(router: routes.router()).test(.router) { client in
            try await client.execute(uri: "/ca.pem", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/x-x509-ca-cert")
                #expect(String(buffer: response.body).hasPrefix("-----BEGIN CERTIFICATE-----"))
            }
            try await client.execute(uri: "/ca.der", method: .get) { response in
                #expect(response.headers[.contentType] == "application/x-x509-ca-cert")
                #expect(Array(response.body.readableBytesView) == [0x30, 0x82, 0x01])
            }
            // No address reached (a router test): no listener serves it, and the PAC is refused, not DIRECT.
            try await client.execute(uri: "/proxy.pac", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.contentType] == "text/plain; charset=utf-8")
                let text = String(buffer: response.body)
                #expect(text.contains("no proxy listener serves") && text.contains("DIRECT") && !text.contains("FindProxyForURL"))
                #expect(!text.contains("127.0.0.1:9090"), "a device is not told the appliance's listeners")
            }
            for path in ["/web-token", "/ca.key", "/api/status", "/login", "/settings.json", "/../ca.key"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .notFound, "\(path)")
                }
            }
            try await client.execute(uri: "/ca.pem", method: .post) { response in #expect(response.status != .ok) }
        }
        // Reached on 127.0.0.1, where the default proxy listener is: the PAC points there.
        try await Application(router: routes.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))).test(.live) {
            client in
            try await client.execute(uri: "/proxy.pac", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/x-ns-proxy-autoconfig")
                #expect(String(buffer: response.body).contains("return \"PROXY 127.0.0.1:9090; DIRECT\";"))
            }
        }
    }
}
