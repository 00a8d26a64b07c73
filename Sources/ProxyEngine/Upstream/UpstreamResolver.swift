import Foundation
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Resolves the hosts the tunnel dials, remembering each answer for a few
/// seconds. Debian runs no caching resolver by default (no nscd, no
/// systemd-resolved), so each new upstream connection waited for a DNS
/// round trip, for the same few names. Failures are never remembered, and
/// an answer lives `lifetime` at most, about what a browser's cache keeps.
final class UpstreamResolver: Sendable {
    /// One cache for the process, as there is one thread pool.
    static let shared = UpstreamResolver()
    static let capacity = 4096
    /// How long an answer is reused (5 s; a test asks for longer, so a
    /// loaded machine does not expire what it checks).
    let lifetime: TimeAmount

    init(lifetime: TimeAmount = .seconds(5)) { self.lifetime = lifetime }

    struct Answer: Sendable {
        var v4: [SocketAddress]
        var v6: [SocketAddress]
    }

    private struct Entry {
        var answer: Answer
        var expires: NIODeadline
    }

    private let cache = Mutex<[String: Entry]>([:])
    /// `getaddrinfo` calls made: what the cache saves shows here.
    let lookups = Atomic<Int>(0)

    /// A resolver for one `connect(host:port:)`: one lookup, shared by
    /// Happy Eyeballs' A and AAAA queries.
    func resolver(host: String, port: Int, on eventLoop: EventLoop, override: String? = nil) -> Resolver & Sendable {
        guard let override else { return Lookup(answer: answer(host: host, port: port, on: eventLoop).flatMapThrowing(Self.notToSelf)) }
        // A host_override rule: this address, no DNS (the name still goes in SNI).
        let answer = Result { try SocketAddress(ipAddress: override, port: port) }.map { address in
            address.protocol == .inet6 ? Answer(v4: [], v6: [address]) : Answer(v4: [address], v6: [])
        }
        return Lookup(answer: eventLoop.makeCompletedFuture(answer).flatMapThrowing(Self.notToSelf))
    }

    /// Drops the proxy's own listening addresses from an answer; none left
    /// is a loop, refused with an error that says so.
    @Sendable static func notToSelf(_ answer: Answer) throws -> Answer {
        let guarded = LoopGuard.shared
        let kept = Answer(v4: answer.v4.filter { !guarded.isOwnListener($0) }, v6: answer.v6.filter { !guarded.isOwnListener($0) })
        if kept.v4.isEmpty && kept.v6.isEmpty, let first = answer.v4.first ?? answer.v6.first {
            throw SelfLoopError(address: "\(first.ipAddress ?? "?"):\(first.port ?? 0)")
        }
        return kept
    }

    func answer(host: String, port: Int, on eventLoop: EventLoop) -> EventLoopFuture<Answer> {
        let key = "\(host.lowercased()):\(port)"
        let now = NIODeadline.now()
        if let hit = cache.withLock({ $0[key] }), hit.expires > now {
            return eventLoop.makeSucceededFuture(hit.answer)
        }
        lookups.wrappingAdd(1, ordering: .relaxed)
        let found = NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { try Self.getaddrinfo(host, port) }
        found.whenSuccess { answer in
            self.cache.withLock { entries in
                // Past the cap, start over rather than keep a stale crowd.
                if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
                entries[key] = Entry(answer: answer, expires: now + self.lifetime)
            }
        }
        return found
    }

    private struct Lookup: Resolver, Sendable {
        let answer: EventLoopFuture<Answer>
        func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> { answer.map(\.v4) }
        func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> { answer.map(\.v6) }
        func cancelQueries() {}
    }

    /// As NIO's own resolver does it: one lookup for both families.
    static func getaddrinfo(_ host: String, _ port: Int) throws -> Answer {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = Glibc.getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else { throw DNSLookupError(host: host, reason: String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(list) }
        var answer = Answer(v4: [], v6: [])
        var next = list
        while let info = next {
            if let raw = info.pointee.ai_addr {
                switch info.pointee.ai_family {
                case AF_INET: answer.v4.append(SocketAddress(UnsafeRawPointer(raw).load(as: sockaddr_in.self), host: host))
                case AF_INET6: answer.v6.append(SocketAddress(UnsafeRawPointer(raw).load(as: sockaddr_in6.self), host: host))
                default: break
                }
            }
            next = info.pointee.ai_next
        }
        guard !answer.v4.isEmpty || !answer.v6.isEmpty else { throw DNSLookupError(host: host, reason: "no IPv4 or IPv6 address") }
        return answer
    }
}
