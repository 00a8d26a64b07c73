import Foundation
import Synchronization
import Testing

@testable import BusymateShared

@Suite struct NotificationTests {
    @Test func roundTrip() throws {
        for name in NotificationName.allCases {
            let n = BusymateNotification(name: name, sender: "tunnel-12", payload: name == .breakpointPaused ? "req 42" : nil)
            #expect(try BusymateNotification.decode(n.encoded()) == n)
        }
        #expect(
            String(decoding: BusymateNotification(name: .caDidChange, sender: "app-1").encoded(), as: UTF8.self)
                == "busymate/1 caDidChange app-1")
        // A payload that starts with a combining mark (found by fuzz-notification).
        let combining = BusymateNotification(name: .tunnelStateChanged, sender: "tunnel-12", payload: "\u{31E}ready")
        #expect(try BusymateNotification.decode(combining.encoded()) == combining)
        // A payload cut at the size limit is cut between characters (found by fuzz-notification).
        for filler in ["", "a", "aa"] {
            let long = BusymateNotification(
                name: .tunnelStateChanged, sender: "tunnel-12", payload: filler + String(repeating: "é", count: 1500))
            let datagram = long.encoded()
            #expect(datagram.count <= BusymateNotification.maxSize && datagram.count > BusymateNotification.maxSize - 2)
            #expect(try BusymateNotification.decode(datagram).payload?.hasPrefix(filler + "éé") == true)
        }
    }

    @Test func malformedDatagramsAreRejected() {
        #expect(throws: BusymateNotification.DecodeError.unknownName("explode")) {
            try BusymateNotification.decode(Array("busymate/1 explode app-1".utf8))
        }
        #expect(throws: BusymateNotification.DecodeError.badHeader) { try BusymateNotification.decode(Array("hello".utf8)) }
        #expect(throws: BusymateNotification.DecodeError.badHeader) {
            try BusymateNotification.decode(Array("busymate/2 caDidChange app-1".utf8))
        }
        #expect(throws: BusymateNotification.DecodeError.notUTF8) { try BusymateNotification.decode([0xFF, 0xFE]) }
        #expect(throws: BusymateNotification.DecodeError.tooLarge(5000)) {
            try BusymateNotification.decode([UInt8](repeating: 65, count: 5000))
        }
    }

    private func collect(_ stream: AsyncStream<BusymateNotification>, for seconds: Double) async -> [BusymateNotification] {
        await withTaskGroup(of: [BusymateNotification].self) { group in
            group.addTask {
                var out: [BusymateNotification] = []
                for await n in stream { out.append(n) }
                return out
            }
            try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            group.cancelAll()
            return await group.next() ?? []
        }
    }

    @Test func postReachesEveryOtherProcessAndNotItself() async throws {
        let dir = try TestDirectory()
        let paths = GroupPaths(root: dir.url)
        let a = try Notifier(paths: paths, role: "app", pid: 1001)
        let b = try Notifier(paths: paths, role: "cli", pid: 1002)
        let aStream = a.notifications()
        let bStream = b.notifications()
        a.post(.settingsDidChange)
        let got = await collect(bStream, for: 0.3)
        b.close()
        let own = await collect(aStream, for: 0.1)
        a.close()
        #expect(got.map(\.name) == [.settingsDidChange])
        #expect(got.first?.sender == "app-1001")
        #expect(own.isEmpty)
    }

    @Test func aGonePeersSocketFileIsRemoved() throws {
        let dir = try TestDirectory()
        let paths = GroupPaths(root: dir.url)
        let gone = try Notifier(paths: paths, role: "tunnel", pid: 2001)
        let path = gone.socketPath
        // Simulate a crash: the file stays, nobody is bound to it.
        _ = try UnixSocket.bind(path: path, type: Int32(SOCK_DGRAM.rawValue), mode: 0o660)
        #expect(FileManager.default.fileExists(atPath: path))
        let poster = try Notifier(paths: paths, role: "app", pid: 2002)
        poster.post(.caDidChange)
        // Posting only queues; flush waits for the delivery.
        poster.flush()
        #expect(!FileManager.default.fileExists(atPath: path))
        poster.close()
        _ = gone
    }

    /// A breakpoint's hold is posted from an event loop: the post must not
    /// wait while notify/ is listed (a slow or busy disk), and the posts
    /// still arrive in the order they were made.
    @Test func postingNeverWaitsForTheNotifyDirectoryAndKeepsTheOrder() async throws {
        let dir = try TestDirectory()
        let paths = GroupPaths(root: dir.url)
        let poster = try Notifier(paths: paths, role: "tunnel", pid: 4001)
        let listener = try Notifier(paths: paths, role: "cli", pid: 4002)
        let stream = listener.notifications()
        // The directory listing hangs until the test lets it go (at most 2 s each).
        let gate = DispatchSemaphore(value: 0)
        poster.beforeListing.withLock { $0 = { _ = gate.wait(timeout: .now() + 2) } }
        let clock = ContinuousClock()
        let started = clock.now
        for id in 1...3 { poster.post(.breakpointPaused, payload: "\(id)") }
        let posting = clock.now - started
        for _ in 1...3 { gate.signal() }
        let got = await collect(stream, for: 1)
        listener.close()
        poster.close()
        #expect(posting < .milliseconds(500), "posting waited \(posting) for the directory listing")
        #expect(got.map(\.payload) == ["1", "2", "3"])
    }

    @Test func newTrafficCapturedIsThrottledToTwoPerSecond() async throws {
        let dir = try TestDirectory()
        let paths = GroupPaths(root: dir.url)
        let poster = try Notifier(paths: paths, role: "tunnel", pid: 3001)
        let listener = try Notifier(paths: paths, role: "cli", pid: 3002)
        let stream = listener.notifications()
        let start = Date()
        var posts = 0
        // At least 0.9 s and 60 posts: a loaded machine sleeps longer than asked.
        while Date().timeIntervalSince(start) < 0.9 || posts < 60 {
            poster.post(.newTrafficCaptured)
            posts += 1
            try await Task.sleep(for: .milliseconds(10))
        }
        let posting = Date().timeIntervalSince(start)
        // Long enough for the trailing post on a loaded machine too.
        let got = await collect(stream, for: 1.5)
        listener.close()
        poster.close()
        // One at once, then at most one per 0.5 s, then the trailing one:
        // 2 or 3 datagrams for 0.9 s of posting, never one per post.
        let most = Int(posting / 0.5) + 2
        #expect(got.count >= 2 && got.count <= most && got.count < posts, "got \(got.count) for \(posts) posts in \(posting) s")
        #expect(got.allSatisfy { $0.name == .newTrafficCaptured })
        // Other names are never held back.
    }
}
