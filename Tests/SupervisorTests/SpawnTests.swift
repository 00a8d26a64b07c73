import BusymateShared
import Foundation
import Testing

@testable import Supervisor

/// The listening sockets reach a child as descriptors 3… in the order
/// given, wherever they sit in the parent.
@Suite struct SpawnTests {
    @Test func descriptorsArriveInOrderWhereverTheySit() throws {
        let dir = URL(fileURLWithPath: "/tmp/bmspawn-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let paths = GroupPaths(root: dir)
        // Sources where a "move them up to 3 + n + 16 first" lands (22…, when
        // free: F_DUPFD takes the lowest free one, never one in use by a test
        // running beside this): each move would overwrite the next source.
        var sockets: [ListenSocket] = []
        for i in 0..<3 {
            let file = dir.appendingPathComponent("source-\(i)")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let fd = open(file.path, O_RDONLY)
            #expect(fd >= 0)
            let moved = fcntl(fd, F_DUPFD, 22)
            #expect(moved >= 22)
            close(fd)
            sockets.append(ListenSocket(name: "s\(i)", descriptor: moved, bound: "-"))
        }
        // Listed highest first: the last source goes to 3, the first to 5.
        sockets.reverse()
        defer { sockets.forEach { close($0.descriptor) } }
        let out = dir.appendingPathComponent("out")
        let script = dir.appendingPathComponent("child.sh")
        try "#!/bin/sh\nreadlink /proc/$$/fd/3 /proc/$$/fd/4 /proc/$$/fd/5 > \(out.path)\n".write(
            to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        let launcher = TunnelLauncher(executable: script.path, paths: paths, identity: .default)
        let done = DispatchSemaphore(value: 0)
        _ = try launcher.spawn(listeners: sockets) { _ in done.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let lines = try String(contentsOf: out, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines == ["source-2", "source-1", "source-0"].map { dir.appendingPathComponent($0).path })
    }
}
