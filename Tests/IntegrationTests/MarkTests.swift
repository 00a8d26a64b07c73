import Foundation
import Testing

extension ApplianceTests {
    /// mitmproxy's marks and comments, from the CLI: kept in the store,
    /// shown by `list` and `show`, found by `~marked`, `~marker` and
    /// `~comment`, carried through a HAR export and back in by an import.
    @Test func marksAndCommentsAreKeptFilteredAndCarriedThroughHAR() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        #expect(try Command.curl(proxyPort: port, "\(base)/one").code == 200)
        #expect(try Command.curl(proxyPort: port, "\(base)/two").code == 200)
        let rows = try appliance.rows("two exchanges are stored") { $0.count >= 2 }
        func id(_ path: String) -> String {
            rows.first { ($0["url"] as? String) == base + path }.flatMap { $0["id"] as? Int }.map(String.init) ?? "?"
        }
        let (one, two) = (id("/one"), id("/two"))
        func urls(_ filter: String) throws -> [String] {
            let r = try appliance.cli(["list", "--json", filter])
            #expect(r.status == 0, "\(filter): \(r.stderr)")
            let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
            return rows.compactMap { ($0["url"] as? String).map { String($0.dropFirst(base.count)) } }
        }
        #expect(try urls("~marked").isEmpty)

        let marked = try appliance.cli(["mark", one, "--comment", "login bug, ticket 42"])
        #expect(marked.status == 0 && marked.stdout == "marked \(one) (default)\n", "\(marked)")
        #expect(try appliance.cli(["mark", two, "--as", "🔥"]).status == 0)
        #expect(try appliance.cli(["comment", two, "slow on the second try"]).status == 0)
        #expect(try urls("~marked") == ["/two", "/one"])
        #expect(try urls("~marker 🔥") == ["/two"])
        #expect(try urls("~comment ticket") == ["/one"])
        #expect(try urls("!~marked").allSatisfy { $0 != "/one" && $0 != "/two" })

        let shown = try appliance.cli(["show", two, "--no-pager"])
        #expect(shown.stdout.contains("marked: 🔥") && shown.stdout.contains("comment: slow on the second try"), "\(shown.stdout)")
        // The table's flags say M.
        let table = try appliance.cli(["list", "~marked"])
        #expect(table.stdout.split(separator: "\n").dropFirst().allSatisfy { $0.contains(" M ") }, "\(table.stdout)")

        // HAR: the entry's own comment field and `_marker`; an import brings them back.
        let har = appliance.base.appendingPathComponent("marked.har")
        #expect(try appliance.cli(["export", "--har", har.path, "~marked"]).status == 0)
        let log = (try JSONSerialization.jsonObject(with: Data(contentsOf: har)) as? [String: Any])?["log"] as? [String: Any]
        let entries = log?["entries"] as? [[String: Any]] ?? []
        #expect(
            entries.compactMap { $0["comment"] as? String }.sorted() == ["login bug, ticket 42", "slow on the second try"], "\(entries)")
        #expect(entries.compactMap { $0["_marker"] as? String }.sorted() == ["default", "🔥"])
        let imported = try WebFrontProcessTests.importHAR(appliance, har)
        #expect(imported.code == 200, "\(imported)")
        let back =
            try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json", "~comment ticket"]).stdout.utf8))
            as? [[String: Any]] ?? []
        #expect(
            back.count == 2 && back.contains { $0["imported"] as? String == "marked.har" && $0["marker"] as? String == "default" },
            "\(back)")

        // Unmark, uncomment (the imported copies keep theirs); a bad id or
        // marker changes nothing and says why.
        #expect(try appliance.cli(["mark", "--remove", one]).status == 0)
        #expect(try urls("~marked & !~comment ticket") == ["/two", "/two"])
        #expect(try urls("~marked") == ["/two", "/two", "/one"])
        #expect(try appliance.cli(["comment", two, ""]).status == 0)
        #expect(try !appliance.cli(["show", two, "--no-pager"]).stdout.contains("comment:"))
        let missing = try appliance.cli(["mark", "99999"])
        #expect(missing.status != 0 && missing.stderr.contains("99999"), "\(missing)")
        let control = try appliance.cli(["mark", two, "--as", "a\u{1B}[31mb"])
        #expect(control.status != 0 && control.stderr.contains("control characters"), "\(control)")
        #expect(try urls("~marker 🔥") == ["/two", "/two"])
    }
}
