import Foundation
import Testing

@testable import BusymateShared

@Suite struct FileWatcherTests {
    /// Runs `change` and returns whether the watcher reported `settings.json` within 2 s.
    private func sees(_ change: (URL) throws -> Void) async throws -> Bool {
        let dir = try TestDirectory()
        let file = dir.url.appendingPathComponent("settings.json")
        // Close-on-exec: Foundation's plain write leaves the fd open in children
        // that parallel tests fork, and their later exit would close it last,
        // firing IN_CLOSE_WRITE after the watch is set.
        try AtomicFile.write(Data("{}\n".utf8), to: file)
        // A child forked by a parallel test between our open and its exec
        // still holds the descriptor (O_CLOEXEC closes it only at exec):
        // let such a late close pass before the watch begins.
        try await Task.sleep(for: .milliseconds(300))
        let watcher = try FileWatcher(directory: dir.url)
        let changes = watcher.changes()
        try change(file)
        let found = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await name in changes where name == "settings.json" { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(2))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        watcher.stop()
        return found
    }

    private func shell(_ command: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        try p.runSerialized()
        p.waitForExit()
        #expect(p.terminationStatus == 0)
    }

    @Test func seesAnEditorsWriteAndRename() async throws {
        #expect(
            try await sees { file in
                let temp = file.deletingLastPathComponent().appendingPathComponent("settings.json.swp")
                try Data("{\"mode\":\"proxy\"}\n".utf8).write(to: temp)
                try shell("mv '\(temp.path)' '\(file.path)'")
            })
    }

    @Test func seesSedInPlace() async throws {
        #expect(try await sees { file in try shell("sed -i 's/{}/{ }/' '\(file.path)'") })
    }

    @Test func seesAnInPlaceWrite() async throws {
        #expect(
            try await sees { file in
                let handle = try FileHandle(forWritingTo: file)
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: Data("{ }\n".utf8))
                try handle.close()
            })
    }

    @Test func seesAnAtomicWrite() async throws {
        #expect(try await sees { file in try AtomicFile.write(Data("{}".utf8), to: file) })
    }

    @Test func readingAloneIsNotAChange() async throws {
        #expect(try await !sees { file in _ = try Data(contentsOf: file) })
    }
}
