import BusymateShared
import Foundation
import Testing

@Suite struct SecretFileTests {
    let dir: String = {
        let path = "/tmp/bmsf-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }()

    @Test func aPlainFileOfAnAllowedOwnerIsRead() throws {
        let path = dir + "/device-jwt.json"
        try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SecretFile.read(URL(fileURLWithPath: path), owners: [geteuid()]) == Data("{}".utf8))
        #expect(try SecretFile.read(URL(fileURLWithPath: dir + "/absent"), owners: [geteuid()]) == nil)
    }

    @Test func whatAGroupMemberCouldPlantIsRefused() throws {
        let target = dir + "/target"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: target))
        // A link, a second name, a FIFO (which would block a plain read), another owner, a huge file.
        symlink(target, dir + "/link")
        link(target, dir + "/hard")
        mkfifo(dir + "/fifo", 0o644)
        #expect(throws: SecretFile.Refused.self) { try SecretFile.read(URL(fileURLWithPath: dir + "/link"), owners: [geteuid()]) }
        #expect(throws: SecretFile.Refused.self) { try SecretFile.read(URL(fileURLWithPath: dir + "/hard"), owners: [geteuid()]) }
        #expect(throws: SecretFile.Refused.self) { try SecretFile.read(URL(fileURLWithPath: dir + "/fifo"), owners: [geteuid()]) }
        let other = dir + "/other"
        try Data("x".utf8).write(to: URL(fileURLWithPath: other))
        #expect(throws: SecretFile.Refused.self) { try SecretFile.read(URL(fileURLWithPath: other), owners: [geteuid() + 1]) }
        let big = dir + "/big"
        try Data(count: 70_000).write(to: URL(fileURLWithPath: big))
        #expect(throws: SecretFile.Refused.self) { try SecretFile.read(URL(fileURLWithPath: big), owners: [geteuid()]) }
    }
}
