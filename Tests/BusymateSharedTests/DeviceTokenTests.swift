import BusymateShared
import Foundation
import Testing

@Suite struct DeviceTokenTests {
    static func jwt(_ claims: [String: Any]) -> String {
        func part(_ object: [String: Any]) -> String {
            let data = try! JSONSerialization.data(withJSONObject: object)
            return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return part(["alg": "HS256", "typ": "JWT"]) + "." + part(claims) + ".c2lnbmF0dXJl"
    }

    let uuid = "6f1c2a52-0d4e-4c59-9a59-0a0a7c7f6e11"

    @Test func aDeviceTokenForThisApplianceServes() {
        let token = Self.jwt([
            "exp": Date().timeIntervalSince1970 + 86_400 * 100, "sub": "owner",
            "app_metadata": ["user_type": "device", "device_uuid": uuid.uppercased()],
        ])
        #expect(DeviceToken.problem(with: token, deviceUUID: uuid) == nil)
        #expect(DeviceToken.isWellFormed(token))
    }

    @Test func theClaimsAreChecked() {
        let later = Date().timeIntervalSince1970 + 86_400
        #expect(
            DeviceToken.problem(
                with: Self.jwt(["exp": later, "app_metadata": ["user_type": "user", "device_uuid": uuid]]), deviceUUID: uuid)?
                .contains("not a device token") == true)
        #expect(
            DeviceToken.problem(
                with: Self.jwt(["exp": later, "app_metadata": ["user_type": "device", "device_uuid": "another"]]), deviceUUID: uuid)?
                .contains("another device") == true)
        #expect(
            DeviceToken.problem(
                with: Self.jwt(["exp": 1_000, "app_metadata": ["user_type": "device", "device_uuid": uuid]]), deviceUUID: uuid)?
                .contains("expired") == true)
        #expect(
            DeviceToken.problem(with: Self.jwt(["app_metadata": ["user_type": "device", "device_uuid": uuid]]), deviceUUID: uuid)?
                .contains("no expiry") == true)
        #expect(DeviceToken.problem(with: "not.a.jwt!", deviceUUID: uuid) != nil)
        #expect(DeviceToken.problem(with: "a.b", deviceUUID: uuid) != nil)
    }

    @Test func theRecordNeverPrintsItsSecrets() {
        let record = DeviceToken(
            token: "eyJ.secret.token", jti: "j1", expiresAt: Date(), deviceUUID: uuid, api: "https://x.supabase.co",
            anonKey: "anon-secret", name: "lab", pairedAt: Date())
        #expect(!"\(record)".contains("secret"))
    }

    @Test func theReportWarnsAMonthAheadAndSaysWhenTheServerRefuses() {
        let now = Date()
        var record = DeviceToken(
            token: "t", jti: "j", expiresAt: now.addingTimeInterval(86_400 * 200 + 60), deviceUUID: uuid,
            api: "https://x.supabase.co", anonKey: "k", name: "lab", pairedAt: now)
        #expect(CloudReport.make(record, sinks: [], now: now).detail == "paired, expires in 200 days")
        #expect(CloudReport.make(record, sinks: [], now: now).pill == "paired")
        record.expiresAt = now.addingTimeInterval(86_400 * 12 + 60)
        let soon = CloudReport.make(record, sinks: [], now: now)
        #expect(soon.expiringSoon && soon.pill == "paired (expires in 12 d)" && soon.detail.contains("re-pair soon"))
        record.expiresAt = now.addingTimeInterval(-5)
        #expect(CloudReport.make(record, sinks: [], now: now).state == "re-pair required")
        record.expiresAt = now.addingTimeInterval(86_400 * 200)
        let refused = CloudReport.make(
            record, sinks: [CloudSinkStatus(sink: "postgrest", state: .rePairRequired, detail: "the token is not accepted")], now: now)
        #expect(refused.state == "re-pair required" && refused.detail.contains("not accepted"))
        #expect(CloudReport.make(nil, sinks: []).state == "not paired")
    }

    @Test func theChildsLineIsReadStrictly() {
        let token = Self.jwt(["exp": 2_000_000_000])
        #expect(
            CloudCallResult.parse("claimed \(token) jti-1 2000000000\n") == .claimed(token: token, jti: "jti-1", expires: 2_000_000_000))
        #expect(CloudCallResult.parse("done\n") == .done)
        #expect(CloudCallResult.parse("failed the server refused\n") == .failed("the server refused"))
        // Anything else, from a child that may have been subverted, is not an answer.
        #expect(CloudCallResult.parse("claimed \(token) jti-1 2000000000 extra") == nil)
        #expect(CloudCallResult.parse("claimed \(token)\u{1b}[2J jti 1") == nil)
        #expect(CloudCallResult.parse("claimed \(token) jti/../x 1") == nil)
        #expect(CloudCallResult.parse("claimed \(token) jti 99999999999999999999") == nil)
        #expect(CloudCallResult.parse("failed \u{1b}]0;owned\u{07}") == nil)
        #expect(CloudCallResult.parse(String(repeating: "a", count: 30_000)) == nil)
        #expect(CloudCallResult.failed("line\nbreak\u{1b}").line == "failed linebreak")
    }
}

@Suite struct DeviceTokenFileTests {
    @Test func theFilesReadBackWhatWasWritten() throws {
        let record = DeviceToken(
            token: "a.b.c", jti: "j", expiresAt: Date(timeIntervalSince1970: 1_900_000_000), deviceUUID: "u",
            api: "https://x.supabase.co", anonKey: "k", name: "lab", pairedAt: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(try DeviceToken.decode(record.encoded()) == record)
        #expect(String(decoding: try record.encoded(), as: UTF8.self).contains("\"expires_at\""))
        let url = URL(fileURLWithPath: "/tmp/bmt-\(UInt32.random(in: 0...UInt32.max)).json")
        defer { unlink(url.path) }
        let team = TeamDatabase(url: "postgres://u:p@127.0.0.1/team", deviceUUID: "u", setAt: Date(timeIntervalSince1970: 1_800_000_000))
        try team.encoded().write(to: url)
        #expect(try TeamDatabase.read(url) == team)
        #expect("\(team)" == "postgres://u@127.0.0.1:5432/team")
    }
}
