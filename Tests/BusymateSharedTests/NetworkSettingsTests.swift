import Foundation
import Testing

@testable import BusymateShared

@Suite struct NetworkSettingsTests {
    @Test func everyNetworkKeyIsRead() throws {
        let (s, unknown) = try AppSettings.decode(
            """
            {"mode": "transparent",
             "transparent": {"port": 9280, "ports": [80, 443, 8080, 443], "interfaces": ["eth1", "wlan0"]},
             "dns": {"port": 9253, "servers": ["10.0.0.53", "fd00::53"]},
             "onboarding": {"listen": "192.168.1.20:9092"},
             "devices": {"port_pool": "9300-9309", "idle_seconds": 30, "host": "::",
                         "list": [{"name": "phone", "port": 9300}, {"name": "vm", "address": "10.0.0.5"}]},
             "access": {"allow": ["192.168.1.0/24", "fd00::/8"], "grants": [{"address": "10.9.9.9", "until": "2030-01-01T00:00:00Z"}]}}
            """)
        #expect(unknown.isEmpty)
        #expect(s.mode == .transparent)
        #expect(s.transparent.port == 9280 && s.transparent.ports == [80, 443, 8080] && s.transparent.interfaces == ["eth1", "wlan0"])
        #expect(s.dns.port == 9253 && s.dns.servers == ["10.0.0.53", "fd00::53"])
        #expect(s.onboardingListen == ListenAddress(host: "192.168.1.20", port: 9092))
        #expect(s.devices.portPool == 9300...9309 && s.devices.idleSeconds == 30 && s.devices.host == "::")
        #expect(s.devices.named("phone")?.port == 9300 && s.devices.named("vm")?.address == "10.0.0.5")
        #expect(s.access.admits("192.168.1.77") && s.access.admits("fd00::1") && s.access.admits("10.9.9.9"))
        #expect(!s.access.admits("10.9.9.8") && !s.access.admits("192.168.2.1"))
    }

    @Test func theDefaultsAreTheSeeds() {
        let s = AppSettings()
        #expect(s.mode == .proxy && s.onboardingListen == nil)
        #expect(s.devices.idleSeconds == 90 && s.devices.portPool == 9100...9199)
        #expect(s.transparent.ports == [80, 443])
        #expect(s.access.allow.isEmpty && !s.access.admits("192.168.1.2"))
    }

    @Test func badValuesNameTheirPlace() {
        #expect(
            AppSettings.decodeError("{\"transparent\": {\"interfaces\": [\"eth0; flush ruleset\"]}}")?.keyPath
                == "transparent.interfaces[0]")
        #expect(
            AppSettings.decodeError("{\"transparent\": {\"interfaces\": [\"averyveryverylongname\"]}}")?.keyPath
                == "transparent.interfaces[0]")
        #expect(AppSettings.decodeError("{\"transparent\": {\"ports\": [53]}}")?.message.contains("DNS") == true)
        #expect(AppSettings.decodeError("{\"transparent\": {\"ports\": []}}")?.keyPath == "transparent.ports")
        #expect(AppSettings.decodeError("{\"transparent\": {\"port\": 80}}")?.keyPath == "transparent.port")
        #expect(AppSettings.decodeError("{\"transparent\": {\"port\": 9300}, \"dns\": {\"port\": 9300}}")?.keyPath == "dns.port")
        #expect(AppSettings.decodeError("{\"dns\": {\"servers\": [\"dns.google\"]}}")?.keyPath == "dns.servers[0]")
        #expect(AppSettings.decodeError("{\"onboarding\": {\"listen\": \"lan:9092\"}}")?.keyPath == "onboarding.listen")
        #expect(AppSettings.decodeError("{\"devices\": {\"port_pool\": \"80-90\"}}")?.keyPath == "devices.port_pool")
        #expect(AppSettings.decodeError("{\"devices\": {\"port_pool\": \"9200-9100\"}}")?.keyPath == "devices.port_pool")
        #expect(
            AppSettings.decodeError("{\"devices\": {\"list\": [{\"name\": \"a b\", \"port\": 9100}]}}")?.keyPath == "devices.list[0].name")
        #expect(AppSettings.decodeError("{\"devices\": {\"list\": [{\"name\": \"a\"}]}}")?.message.contains("port") == true)
        #expect(
            AppSettings.decodeError("{\"devices\": {\"list\": [{\"name\": \"a\", \"port\": 9100}, {\"name\": \"a\", \"port\": 9101}]}}")?
                .message.contains("twice") == true)
        #expect(
            AppSettings.decodeError("{\"devices\": {\"list\": [{\"name\": \"a\", \"port\": 9100}, {\"name\": \"b\", \"port\": 9100}]}}")?
                .keyPath == "devices.list[1].port")
        #expect(AppSettings.decodeError("{\"access\": {\"allow\": [\"10.0.0.0/33\"]}}")?.keyPath == "access.allow[0]")
        // Two listeners on one port: the redirect would reach the wrong one.
        #expect(AppSettings.decodeError("{\"transparent\": {\"port\": 9091}}")?.message == "port 9091 is web.listen's already")
        #expect(AppSettings.decodeError("{\"proxy\": {\"listen\": [\"0.0.0.0:9153\"]}}")?.keyPath == "dns.port")
        #expect(
            AppSettings.decodeError("{\"devices\": {\"list\": [{\"name\": \"tv\", \"port\": 9090}]}}")?.keyPath == "devices.list[0].port")
        #expect(AppSettings.decodeError("{\"onboarding\": {\"listen\": \"10.0.0.1:9180\"}}")?.keyPath == "transparent.port")
        #expect(
            AppSettings.decodeError("{\"access\": {\"grants\": [{\"address\": \"10.0.0.1\", \"until\": \"tomorrow\"}]}}")?.keyPath
                == "access.grants[0].until")
    }

    @Test func networksMatchAddressesAsTheKernelWrites() throws {
        let lan = try #require(IPNetwork("192.168.1.0/24"))
        #expect(lan.contains("192.168.1.200") && !lan.contains("192.168.2.1"))
        // A v4 client of a dual-stack socket.
        #expect(lan.contains("::ffff:192.168.1.9"))
        #expect(try #require(IPNetwork("10.1.2.3")).contains("10.1.2.3") && !(try #require(IPNetwork("10.1.2.3"))).contains("10.1.2.4"))
        let ula = try #require(IPNetwork("fd77:1::/64"))
        #expect(ula.contains("fd77:1::2") && !ula.contains("fd77:2::2") && !ula.contains("10.0.0.1"))
        #expect(try #require(IPNetwork("0.0.0.0/0")).contains("8.8.8.8"))
        #expect(IPNetwork("10.0.0.0/8")?.description == "10.0.0.0/8" && IPNetwork("10.9.9.9/8")?.description == "10.0.0.0/8")
        #expect(IPNetwork("example.com") == nil && IPNetwork("10.0.0.0/x") == nil && IPNetwork("::/129") == nil)
        #expect(IPNetwork.isLoopback("127.0.0.5") && IPNetwork.isLoopback("::1") && !IPNetwork.isLoopback("10.0.0.1"))
    }

    @Test func expiredGrantsAdmitNobody() throws {
        var access = AppSettings.Access()
        access.grants = [try #require(AppSettings.Grant(address: "10.0.0.9", until: Date().addingTimeInterval(-1)))]
        #expect(!access.admits("10.0.0.9"))
    }

    @Test func theListenersFollowTheMode() throws {
        var s = try AppSettings.decode("{\"devices\": {\"list\": [{\"name\": \"phone\", \"port\": 9100}]}}").settings
        #expect(s.wantedListeners.map(\.name) == ["127.0.0.1:9090", "device:phone@0.0.0.0:9100"])
        s.mode = .transparent
        let names = s.wantedListeners.map(\.name)
        #expect(
            names.contains("transparent@0.0.0.0:9180") && names.contains("dns-udp@0.0.0.0:9153") && names.contains("dns-tcp@0.0.0.0:9153"))
        #expect(s.wantedListeners.first { $0.role == .dnsUDP }?.role.isDatagram == true)
    }

    @Test func listenerNamesCarryTheirRole() {
        #expect(ListenerRole.parse("127.0.0.1:9090")?.role == .proxy)
        #expect(ListenerRole.parse("transparent@0.0.0.0:9180")?.role == .transparent)
        #expect(ListenerRole.parse("device:phone@0.0.0.0:9100")?.role == .device("phone"))
        #expect(ListenerRole.parse("device:phone@0.0.0.0:9100")?.address == "0.0.0.0:9100")
        #expect(ListenerRole.parse("dns-udp@[::]:9153")?.role == .dnsUDP)
        #expect(ListenerRole.parse("device:bad name@0.0.0.0:1") == nil && ListenerRole.parse("what@x") == nil)
        for role in [ListenerRole.proxy, .transparent, .device("tv"), .dnsUDP, .dnsTCP] {
            #expect(ListenerRole.parse(role.name(ListenAddress(host: "::", port: 1)))?.role == role)
        }
    }

    @Test func theLiveModeIsReconciledAsTheSeedDoes() {
        #expect(NetworkPresence(transparentTraffic: true, proxyTraffic: true).liveMode(configured: "proxy") == "transparent")
        #expect(NetworkPresence(proxyTraffic: true).liveMode(configured: "transparent") == "proxy")
        #expect(NetworkPresence().liveMode(configured: "transparent") == "transparent")
    }

    @Test func devicesMergeNamedSeenAndOnboarded() {
        var settings = AppSettings()
        settings.devices.list = [
            AppSettings.NamedDevice(name: "phone", port: 9100), AppSettings.NamedDevice(name: "vm", address: "10.0.0.5"),
        ]
        let seen = [
            DevicePresence(
                name: "phone", address: "10.0.0.2", port: 9100, source: "port", online: true, lastSeen: Date(), caTrustedAt: Date()),
            DevicePresence(name: "10.0.0.3", address: "10.0.0.3", port: nil, source: "transparent", online: false, lastSeen: Date()),
        ]
        let onboarding = OnboardingLog(clients: ["10.0.0.2": .init(caDownloads: 1), "10.0.0.4": .init(caDownloads: 2)])
        let rows = DeviceRow.merge(settings: settings, seen: seen, onboarding: onboarding, exchangesToday: ["phone": 3, "10.0.0.3": 1])
        #expect(rows.map(\.name) == ["phone", "vm", "10.0.0.3", "10.0.0.4"])
        #expect(
            rows[0].online && rows[0].source == "port" && rows[0].exchangesToday == 3 && rows[0].caDownloads == 1 && rows[0].named
                && rows[0].caTrustedAt != nil)
        #expect(rows.dropFirst().allSatisfy { $0.caTrustedAt == nil })
        #expect(!rows[1].online && rows[1].lastSeen == nil && rows[1].address == "10.0.0.5")
        #expect(!rows[2].named && rows[2].source == "transparent")
        #expect(rows[3].caDownloads == 2 && rows[3].source == nil)
    }
}
