import Foundation
import Testing

@testable import BusymateShared

@Suite struct EnrolmentTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aLinkAdmitsOneAddressUntilItExpiresOrIsRevoked() {
        var e = AppSettings.Enrolment(tokenSHA256: AppSettings.Enrolment.digest("t"), expires: now.addingTimeInterval(60))
        #expect(e.verdict(client: "10.0.0.2", now: now) == .admit(first: true))
        e.redeemedBy = "10.0.0.2"
        #expect(e.verdict(client: "10.0.0.2", now: now) == .admit(first: false))
        #expect(e.verdict(client: "::ffff:10.0.0.2", now: now) == .admit(first: false), "an IPv4-mapped address is the same device")
        #expect(e.verdict(client: "10.0.0.3", now: now) == .usedElsewhere("10.0.0.2"))
        #expect(
            e.verdict(client: "10.0.0.2", now: now.addingTimeInterval(60)) == .admit(first: false),
            "its device may come back after the link expired")
        var fresh = e
        fresh.redeemedBy = nil
        #expect(fresh.verdict(client: "10.0.0.3", now: now.addingTimeInterval(60)) == .expired)
        e.revoked = true
        #expect(e.verdict(client: "10.0.0.2", now: now) == .revoked)
    }

    @Test func tokensAreRandomURLSafeAndOnlyTheirDigestIsKept() throws {
        let a = AppSettings.Enrolment.newToken(), b = AppSettings.Enrolment.newToken()
        #expect(a != b && a.count == 22 && AppSettings.Enrolment.isWellFormed(a))
        #expect(!AppSettings.Enrolment.isWellFormed("../../etc") && !AppSettings.Enrolment.isWellFormed("short"))
        let device = AppSettings.NamedDevice(name: "phone", port: 9100)
        var withLink = device
        withLink.enrolment = AppSettings.Enrolment(tokenSHA256: AppSettings.Enrolment.digest(a), expires: now)
        var settings = AppSettings()
        settings.devices.list = [withLink]
        let text = JSONWriter.write(JSONNode(.object([("devices", JSONNode(.object([("list", JSONNode(.array([withLink.node])))])))])))
        #expect(!text.contains(a), "settings.json never holds the token")
        let read = try AppSettings.decode(text).settings
        #expect(read.devices.list == settings.devices.list, "written and read back the same")
        #expect(read.enrolling(token: a)?.name == "phone")
        #expect(read.enrolling(token: b) == nil)
    }

    @Test func aBadEnrolmentIsRefusedWithItsPath() {
        let text =
            #"{"devices": {"list": [{"name": "p", "port": 9100, "enrolment": {"token_sha256": "xyz", "expires": "2026-11-25T10:00:00Z"}}]}}"#
        #expect(throws: SettingsError.self) { try AppSettings.decode(text) }
        do {
            _ = try AppSettings.decode(text)
        } catch {
            #expect(error.keyPath == "devices.list[0].enrolment.token_sha256")
        }
    }

    /// The tunnel's renewal: only a device still enrolled from the address
    /// and still granted is extended; the rest of the file is kept.
    @Test func aRenewalExtendsOnlyLiveEnrolledGrants() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("enrol-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("settings.json")
        let iso = { (d: Date) in ISO8601DateFormatter().string(from: d) }
        let soon = Date().addingTimeInterval(600)
        let digest = AppSettings.Enrolment.digest("t")
        try Data(
            """
            {"future_key": 1, "devices": {"list": [
              {"name": "tablet", "port": 9100, "address": "10.0.0.7", "enrolment": {"token_sha256": "\(digest)", "expires": "\(iso(soon))", "redeemed_by": "10.0.0.7"}},
              {"name": "old", "port": 9101, "address": "10.0.0.9", "enrolment": {"token_sha256": "\(digest)", "expires": "\(iso(soon))", "redeemed_by": "10.0.0.9", "revoked": true}}]},
             "access": {"grants": [{"address": "10.0.0.7", "until": "\(iso(soon))"}, {"address": "10.0.0.9", "until": "\(iso(soon))"}]}}
            """.utf8
        ).write(to: file)
        try GrantRenewal.write(["10.0.0.7", "10.0.0.9", "10.0.0.5"], to: file)
        let (settings, unknown) = try AppSettings.decode(String(decoding: try Data(contentsOf: file), as: UTF8.self))
        #expect(unknown == ["future_key"])
        let renewed = try #require(settings.access.grantedUntil("10.0.0.7"))
        #expect(renewed > Date().addingTimeInterval(86_400 - 60))
        #expect(settings.access.grantedUntil("10.0.0.9").map { abs($0.timeIntervalSince(soon)) < 2 } == true, "revoked: left as it was")
        #expect(settings.access.grantedUntil("10.0.0.5") == nil, "never granted: not created")
    }

    /// Entries are edited in place: a key this version does not know, on
    /// the device or on any other, survives an admission, a new link and a
    /// revocation; a new link ends what the old one admitted, unless
    /// another enrolment holds that address.
    @Test func deviceEditsKeepWhatTheyDoNotOwnAndEndAdmissionsTheyGave() throws {
        let now = Date()
        var root = try JSONParser.parse(
            Array(
                """
                {"devices": {"list": [{"name": "phone", "port": 9100, "note": "QA"}, {"name": "pad", "port": 9101, "colour": "red"}]},
                 "access": {"grants": [{"address": "10.0.0.0/24", "until": "\(ISO8601DateFormatter().string(from: now.addingTimeInterval(7 * 86_400)))", "why": "lab"}]}}
                """.utf8))
        let first = try DeviceList.issueLink("phone", lifetime: 60, in: &root, now: now)
        #expect(first.ended == nil)
        try DeviceList.admit("phone", client: "10.0.0.7", first: true, in: &root, now: now)
        var settings = try AppSettings.decode(root).settings
        #expect(settings.devices.named("phone")?.address == "10.0.0.7")
        #expect(settings.devices.named("phone")?.enrolment?.redeemedBy == "10.0.0.7")
        #expect(DeviceList.exactGrant("10.0.0.7", in: settings.access, now: now).map { $0 > now.addingTimeInterval(86_000) } == true)
        #expect(
            root["devices"]?["list"].flatMap { if case let .array(items) = $0.value { return items[0]["note"] } else { return nil } }
                == JSONNode(.string("QA")))
        #expect(
            root["devices"]?["list"].flatMap { if case let .array(items) = $0.value { return items[1]["colour"] } else { return nil } }
                == JSONNode(.string("red")))
        #expect(
            root["access"]?["grants"].flatMap { if case let .array(items) = $0.value { return items[0]["why"] } else { return nil } }
                == JSONNode(.string("lab")))
        // The pad is enrolled from the phone's address: the phone's enrolment is superseded.
        _ = try DeviceList.issueLink("pad", lifetime: 60, in: &root, now: now)
        try DeviceList.admit("pad", client: "10.0.0.7", first: true, in: &root, now: now)
        settings = try AppSettings.decode(root).settings
        #expect(settings.devices.named("phone")?.enrolment?.revoked == true)
        #expect(settings.devices.named("phone")?.address == nil)
        // Revoking the superseded one leaves the pad admitted.
        #expect(try DeviceList.revoke("phone", in: &root, now: now) == nil)
        #expect(DeviceList.exactGrant("10.0.0.7", in: try AppSettings.decode(root).settings.access, now: now) != nil)
        // A new link for the pad ends what its old one admitted.
        let again = try DeviceList.issueLink("pad", lifetime: 60, in: &root, now: now)
        #expect(again.ended == "10.0.0.7")
        settings = try AppSettings.decode(root).settings
        #expect(DeviceList.exactGrant("10.0.0.7", in: settings.access, now: now) == nil)
        #expect(settings.access.grants.count == 1, "the lab's network grant stays")
        #expect(
            root["devices"]?["list"].flatMap { if case let .array(items) = $0.value { return items[1]["colour"] } else { return nil } }
                == JSONNode(.string("red")))
    }
}
