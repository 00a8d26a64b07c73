import BusymateShared
import Foundation
import Testing

@testable import ProxyEngine

/// A refusal counts as pinning only from a client that trusts our CA for
/// other hosts, and only the second time within the window.
@Suite struct PinEvidenceTests {
    @Test func trustForTheSameHostIsNoEvidence() {
        var e = PinEvidence()
        let now = Date()
        e.trusted(client: "10.0.0.2", host: "pinned.test", at: now)
        #expect(!e.trustsUsElsewhere(client: "10.0.0.2", besides: "pinned.test", at: now))
        e.trusted(client: "10.0.0.2", host: "other.test", at: now)
        #expect(e.trustsUsElsewhere(client: "10.0.0.2", besides: "pinned.test", at: now))
        #expect(!e.trustsUsElsewhere(client: "10.0.0.3", besides: "pinned.test", at: now))
        // Trust goes stale after the window.
        #expect(!e.trustsUsElsewhere(client: "10.0.0.2", besides: "pinned.test", at: now.addingTimeInterval(PinEvidence.window + 1)))
    }

    @Test func strikesCountWithinTheWindowAndAreForgotten() {
        var e = PinEvidence()
        let now = Date()
        #expect(e.strike(client: "10.0.0.2", host: "pinned.test", at: now) == 1)
        #expect(e.strike(client: "10.0.0.9", host: "pinned.test", at: now) == 1)
        #expect(e.strike(client: "10.0.0.2", host: "pinned.test", at: now.addingTimeInterval(5)) == 2)
        // An old strike no longer counts.
        #expect(e.strike(client: "10.0.0.2", host: "late.test", at: now) == 1)
        #expect(e.strike(client: "10.0.0.2", host: "late.test", at: now.addingTimeInterval(PinEvidence.window + 1)) == 1)
        e.forget(host: "pinned.test")
        #expect(e.strike(client: "10.0.0.2", host: "pinned.test", at: now.addingTimeInterval(6)) == 1)
    }

    @Test func loopbackIsEveryLocalProcess() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] { #expect(IPNetwork.isLoopback(ip)) }
        for ip in ["10.0.0.2", "192.168.1.20", "fe80::1", "::ffff:10.0.0.2"] { #expect(!IPNetwork.isLoopback(ip)) }
    }

    /// A pin made while the store was being read is not in what was read:
    /// it is kept, where one made before the read and gone from it was removed.
    @Test func aPinMadeWhileTheStoreWasReadSurvivesTheRead() {
        let interception = Interception()
        interception.apply(AppSettings())
        interception.noteTrusted(client: "10.0.0.2", host: "other.test")
        let readBegan = Date()
        #expect(interception.refused("pinned.test", reason: "test", client: "10.0.0.2") == .firstRefusal)
        guard case .pinned = interception.refused("pinned.test", reason: "test", client: "10.0.0.2") else {
            Issue.record("a second refusal pins")
            return
        }
        interception.setPinned([:], readSince: readBegan)
        #expect(interception.isPinned("pinned.test"), "a pin newer than the read stays")
        interception.setPinned([:], readSince: Date().addingTimeInterval(1))
        #expect(!interception.isPinned("pinned.test"), "a read that began after it, without it: removed (busymate pinned remove)")
    }

    /// `busymate pinned remove` and a shorter `pin_ttl` in one reload: the
    /// pin was made before the read, so it goes, whatever its old end.
    @Test func aRemovedPinGoesEvenWhenTheSameReloadShortensTheTTL() {
        let interception = Interception()
        var settings = AppSettings()
        settings.pinTTL = 24 * 3600
        interception.apply(settings)
        interception.noteTrusted(client: "10.0.0.2", host: "other.test")
        _ = interception.refused("pinned.test", reason: "test", client: "10.0.0.2")
        _ = interception.refused("pinned.test", reason: "test", client: "10.0.0.2")
        #expect(interception.isPinned("pinned.test"))
        settings.pinTTL = 3600
        interception.apply(settings)
        interception.setPinned([:], readSince: Date())
        #expect(!interception.isPinned("pinned.test"))
    }
}
