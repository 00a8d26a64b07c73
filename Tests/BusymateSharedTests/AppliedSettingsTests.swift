import Foundation
import Logging
import Testing

@testable import BusymateShared

@Suite struct AppliedSettingsTests {
    let logger = Logger(label: "test")

    @Test func appliesEachContentOnceAndKeepsTheLastGoodOnError() {
        var applied = AppliedSettings(SettingsFile.parse(Data("{}".utf8)))
        let debug = SettingsFile.parse(Data("{\"log_level\": \"debug\"}".utf8))
        guard case .applied = applied.apply(debug, logger: logger) else {
            Issue.record("not applied")
            return
        }
        #expect(applied.settings.logLevel == .debug)
        #expect(applied.sha256 == debug.sha256)
        // The same content again (inotify and a notification for one save).
        guard case .unchanged = applied.apply(debug, logger: logger) else {
            Issue.record("applied twice")
            return
        }

        let broken = SettingsFile.parse(Data("{\"log_level\": ".utf8))
        guard case .rejected = applied.apply(broken, logger: logger) else {
            Issue.record("not rejected")
            return
        }
        #expect(applied.settings.logLevel == .debug)
        #expect(applied.sha256 == debug.sha256)
        #expect(applied.error?.position == SourcePosition(line: 1, column: 15))

        guard case let .applied(previous) = applied.apply(SettingsFile.parse(Data("{}".utf8)), logger: logger) else {
            Issue.record("fix not applied")
            return
        }
        #expect(previous.logLevel == .debug)
        #expect(applied.error == nil)
    }

    @Test func startsOnDefaultsWhenTheFileIsInvalid() {
        let applied = AppliedSettings(SettingsFile.parse(Data("nope".utf8)))
        #expect(applied.settings == AppSettings())
        #expect(applied.sha256 == "")
        #expect(applied.error != nil)
    }
}
