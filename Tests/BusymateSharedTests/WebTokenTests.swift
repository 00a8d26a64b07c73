import Foundation
import Testing

@testable import BusymateShared

/// The supervisor's token file: made once, kept while it is its own, and
/// never one another user left in the group-writable directory.
@Suite struct WebTokenTests {
    @Test func aTokenIsKeptWhileItIsOursAndAPlantedOneIsReplaced() throws {
        let dir = URL(fileURLWithPath: "/tmp/bmtoken-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let paths = GroupPaths(root: dir)
        let first = try WebToken.ensure(paths, group: nil)
        #expect(WebToken.isWellFormed(first))
        #expect(try WebToken.ensure(paths, group: nil) == first)
        var st = stat()
        #expect(stat(paths.webToken.path, &st) == 0 && st.st_mode & 0o777 == 0o640)
        // A well-formed token someone else wrote (nobody's, here): replaced.
        guard geteuid() == 0 else { return }
        unlink(paths.webToken.path)
        let planted = String(repeating: "a", count: 64)
        try Data(planted.utf8).write(to: paths.webToken)
        chown(paths.webToken.path, 65534, 65534)
        let replaced = try WebToken.ensure(paths, group: nil)
        #expect(replaced != planted)
        #expect(stat(paths.webToken.path, &st) == 0 && st.st_uid == 0)
    }
}
