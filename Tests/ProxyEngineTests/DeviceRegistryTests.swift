import BusymateShared
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ProxyEngine

@Suite struct DeviceRegistryTests {
    func address(_ ip: String) throws -> SocketAddress { try SocketAddress(ipAddress: ip, port: 50000) }

    func registry(_ settings: String) throws -> DeviceRegistry {
        let registry = DeviceRegistry()
        registry.apply(try AppSettings.decode(settings).settings)
        return registry
    }

    /// Accepting a client asks whether it comes from this machine: the
    /// interfaces are read (getifaddrs, a netlink round trip) off the event
    /// loops, and the accept reads the last list, first use included.
    @Test func acceptNeverReadsTheInterfacesOnAnEventLoop() async throws {
        let reads = Atomic<Int>(0)
        let onLoop = Atomic<Int>(0)
        let addresses = LocalAddresses(read: {
            if MultiThreadedEventLoopGroup.currentEventLoop != nil { onLoop.add(1, ordering: .relaxed) }
            reads.add(1, ordering: .relaxed)
            return ["192.0.2.10"]
        })
        let registry = DeviceRegistry(localAddresses: addresses)
        let own = try address("192.0.2.10")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        // The first client, accepted before anything read the interfaces.
        _ = try await loop.submit { registry.admission(own, listenerIsLoopback: false) }.get()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(30)
        while reads.load(ordering: .relaxed) == 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(reads.load(ordering: .relaxed) > 0, "the interfaces were never read")
        // Once read, a client from this machine's own address is let in, on the loop.
        let later = try await loop.submit { registry.admission(own, listenerIsLoopback: false) }.get()
        #expect(later == .admitted)
        #expect(onLoop.load(ordering: .relaxed) == 0, "getifaddrs ran on an event loop")
    }

    @Test func onlyAllowedClientsGetInOffLoopback() throws {
        let r = try registry(
            "{\"access\": {\"allow\": [\"192.168.1.0/24\"], \"grants\": [{\"address\": \"10.9.9.9\", \"until\": \"2099-01-01T00:00:00Z\"}]}}"
        )
        #expect(r.admits(try address("192.168.1.7"), listenerIsLoopback: false))
        #expect(r.admits(try address("::ffff:192.168.1.7"), listenerIsLoopback: false))
        #expect(r.admits(try address("10.9.9.9"), listenerIsLoopback: false))
        #expect(r.admits(try address("127.0.0.1"), listenerIsLoopback: false))
        #expect(!r.admits(try address("203.0.113.5"), listenerIsLoopback: false))
        #expect(!r.admits(try address("2001:db8::5"), listenerIsLoopback: false))
        #expect(r.refusedCount == 2)
        // A loopback listener is only reachable from here anyway.
        #expect(r.admits(try address("203.0.113.5"), listenerIsLoopback: true))
    }

    @Test func aGrantSaysWhenItEndsAndAskingAgainCountsNothing() throws {
        let r = try registry(
            """
            {"access": {"allow": ["192.168.1.0/24"], "grants": [{"address": "10.9.9.9", "until": "2099-01-01T00:00:00Z"},
                                                               {"address": "10.9.9.0/24", "until": "2098-01-01T00:00:00Z"}]}}
            """)
        let until = try #require(ISO8601DateFormatter().date(from: "2099-01-01T00:00:00Z"))
        #expect(r.admission(try address("10.9.9.9"), listenerIsLoopback: false) == .granted(until: until))
        #expect(r.admission(try address("192.168.1.7"), listenerIsLoopback: false) == .admitted)
        #expect(r.admission(try address("10.9.9.9"), listenerIsLoopback: true) == .admitted)
        #expect(r.readmission("10.9.9.9") == .granted(until: until))
        #expect(r.readmission("203.0.113.5") == .refused)
        #expect(r.refusedCount == 0)
        r.apply(try AppSettings.decode("{}").settings)
        #expect(r.readmission("10.9.9.9") == .refused)
    }

    @Test func clientsAreNamedByPortThenAddressThenThemselves() throws {
        let r = try registry("{\"devices\": {\"list\": [{\"name\": \"vm\", \"address\": \"10.0.0.5\"}]}}")
        #expect(r.identify(try address("10.0.0.5"), frontEnd: .device("phone")) == CapturePeer(device: "phone", frontEnd: "port"))
        #expect(r.identify(try address("10.0.0.5"), frontEnd: .transparent) == CapturePeer(device: "vm", frontEnd: "transparent"))
        #expect(r.identify(try address("::ffff:10.0.0.6"), frontEnd: .explicit) == CapturePeer(device: "10.0.0.6", frontEnd: "proxy"))
    }

    /// Trust is what the tunnel saw the device do (a completed intercepted
    /// handshake), per device, whatever this machine's own store holds.
    @Test func aDeviceTrustsTheCAOnceItsHandshakeCompletes() throws {
        let r = try registry("{}")
        let phone = CapturePeer(device: "phone", frontEnd: "port")
        let tablet = CapturePeer(device: "tablet", frontEnd: "port")
        // Two devices behind one address (their own pool ports): two.
        r.touch(phone, address: try address("10.0.0.2"), now: 10)
        r.touch(tablet, address: try address("10.0.0.2"), now: 10)
        #expect(r.snapshot(now: 11).devices.allSatisfy { $0.caTrustedAt == nil })
        r.trusted(phone)
        let first = try #require(r.snapshot(now: 12).devices.first { $0.name == "phone" }?.caTrustedAt)
        r.trusted(phone)
        var devices = r.snapshot(now: 13).devices
        #expect(devices.first { $0.name == "phone" }?.caTrustedAt == first, "the first handshake is kept")
        #expect(devices.first { $0.name == "tablet" }?.caTrustedAt == nil)
        // A new CA: nobody has trusted it yet.
        r.forgetTrust()
        devices = r.snapshot(now: 14).devices
        #expect(devices.allSatisfy { $0.caTrustedAt == nil })
    }

    /// The seed's whitelist, renewed while in use: an enrolled device that
    /// sent traffic in the idle window has its grant extended once it is
    /// an hour old, not before; a revoked, idle or ungranted one is not.
    @Test func anEnrolledDeviceInUseHasItsGrantRenewedHourly() throws {
        let now = Date()
        let iso = { (d: Date) in ISO8601DateFormatter().string(from: d) }
        let digest = String(repeating: "a", count: 64)
        func settings(grantLeft: Double, revoked: Bool = false) -> String {
            """
            {"devices": {"idle_seconds": 90, "list": [
              {"name": "tablet", "port": 9100, "address": "10.0.0.7",
               "enrolment": {"token_sha256": "\(digest)", "expires": "\(iso(now.addingTimeInterval(60)))", "revoked": \(revoked),
                             "redeemed_by": "10.0.0.7", "redeemed_at": "\(iso(now))"}},
              {"name": "kiosk", "port": 9101}]},
             "access": {"grants": [{"address": "10.0.0.7", "until": "\(iso(now.addingTimeInterval(grantLeft)))"},
                                   {"address": "10.0.0.8", "until": "\(iso(now.addingTimeInterval(600)))"}]}}
            """
        }
        let tablet = CapturePeer(device: "tablet", frontEnd: "port")
        let kiosk = CapturePeer(device: "kiosk", frontEnd: "port")
        var r = try registry(settings(grantLeft: 86_400 - 600))
        r.touch(tablet, address: try address("10.0.0.7"), now: 1000)
        r.touch(kiosk, address: try address("10.0.0.8"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1001).isEmpty, "a grant renewed 10 minutes ago waits")
        r = try registry(settings(grantLeft: 86_400 - 3_700))
        r.touch(tablet, address: try address("10.0.0.7"), now: 1000)
        r.touch(kiosk, address: try address("10.0.0.8"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1001) == ["10.0.0.7"], "in use, an hour old: renewed (the kiosk is not enrolled)")
        #expect(r.renewalsDue(now: now, monotonicNow: 1002).isEmpty, "asked once: not again within the step, written or not")
        r = try registry(settings(grantLeft: 86_400 - 3_700))
        r.touch(tablet, address: try address("10.0.0.7"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1100).isEmpty, "idle for longer than the window: not renewed")
        r = try registry(settings(grantLeft: 86_400 - 3_700))
        r.touch(tablet, address: try address("10.0.0.9"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1001).isEmpty, "its name's traffic from another address renews nothing")
        r = try registry(settings(grantLeft: 86_400 - 3_700, revoked: true))
        r.touch(tablet, address: try address("10.0.0.7"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1001).isEmpty, "revoked: not renewed")
        r = try registry(settings(grantLeft: -5))
        r.touch(tablet, address: try address("10.0.0.7"), now: 1000)
        #expect(r.renewalsDue(now: now, monotonicNow: 1001).isEmpty, "an ended grant is not revived")
    }

    @Test func presenceComesAndGoesWithTheIdleWindow() throws {
        let r = try registry("{\"devices\": {\"idle_seconds\": 90}}")
        let phone = CapturePeer(device: "phone", frontEnd: "port")
        r.touch(phone, address: try address("10.0.0.2"), now: 1000)
        #expect(r.sweep(now: 1000.5) == [.init(device: "phone", online: true, source: "port")])
        #expect(r.sweep(now: 1050).isEmpty)
        r.touch(phone, address: try address("10.0.0.2"), now: 1080)
        #expect(r.sweep(now: 1160).isEmpty)
        #expect(r.sweep(now: 1170.5) == [.init(device: "phone", online: false, source: "port")])
        let (devices, _) = r.snapshot(now: 1171)
        #expect(devices.map(\.name) == ["phone"] && devices[0].online == false && devices[0].address == "10.0.0.2")
    }

    @Test func transparentTrafficOutranksTheProxyAsTheVPNOutranksPAC() throws {
        let r = try registry("{\"devices\": {\"idle_seconds\": 90}}")
        let client = try address("10.0.0.3")
        r.touch(CapturePeer(device: "10.0.0.3", frontEnd: "transparent"), address: client, now: 100)
        r.touch(CapturePeer(device: "10.0.0.3", frontEnd: "proxy"), address: client, now: 110)
        var (devices, network) = r.snapshot(now: 111)
        #expect(devices.first?.source == "transparent")
        #expect(network.transparentTraffic && network.proxyTraffic && network.liveMode(configured: "proxy") == "transparent")
        // Once the transparent traffic is older than the window, the proxy's shows.
        r.touch(CapturePeer(device: "10.0.0.3", frontEnd: "proxy"), address: client, now: 200)
        (devices, network) = r.snapshot(now: 201)
        #expect(devices.first?.source == "proxy" && network.liveMode(configured: "transparent") == "proxy")
    }

    @Test func namesLearnedFromDNSExpire() {
        let names = DNSNames()
        names.learn(address: "10.0.0.9", name: "example.com", ttl: 30, client: "10.0.0.2", now: 0)
        #expect(names.name(for: "10.0.0.9", client: "10.0.0.2", now: 59) == "example.com")
        #expect(names.name(for: "::ffff:10.0.0.9", client: "::ffff:10.0.0.2", now: 59) == "example.com")
        // Another device's lookups do not label this one's connections.
        #expect(names.name(for: "10.0.0.9", client: "10.0.0.3", now: 59) == nil)
        #expect(names.name(for: "10.0.0.9", client: "10.0.0.2", now: 61) == nil)
    }

    @Test func nameserversComeFromResolvConf() {
        let text = "# generated\nnameserver 10.0.0.53\nnameserver fe80::1%eth0\nsearch lan\nnameserver 2001:db8::53\n"
        #expect(DNSForwarder.nameservers(in: text) == ["10.0.0.53", "2001:db8::53"])
    }
}
