import NIOCore
import NIOPosix
import Testing

@testable import ProxyEngine

@Suite struct UpstreamResolverTests {
    @Test func anAnswerIsReusedForAFewSecondsPerHostAndPort() async throws {
        // Reuse is what is checked here, not the lifetime: long enough for any machine's load.
        let resolver = UpstreamResolver(lifetime: .seconds(120))
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let first = try await resolver.answer(host: "localhost", port: 8080, on: loop).get()
        #expect(first.v4.contains { $0.ipAddress == "127.0.0.1" && $0.port == 8080 })
        #expect(resolver.lookups.load(ordering: .relaxed) == 1)
        // The bootstrap-facing resolver splits the one answer by family.
        let lookup = resolver.resolver(host: "LOCALHOST", port: 8080, on: loop)
        let v4 = try await lookup.initiateAQuery(host: "LOCALHOST", port: 8080).get()
        #expect(v4.map(\.ipAddress) == first.v4.map(\.ipAddress))
        #expect(resolver.lookups.load(ordering: .relaxed) == 1, "the name's case does not matter")
        // Another port is another answer (the addresses carry it).
        let other = try await resolver.answer(host: "localhost", port: 9090, on: loop).get()
        #expect(other.v4.allSatisfy { $0.port == 9090 })
        #expect(resolver.lookups.load(ordering: .relaxed) == 2)
        // An IP literal resolves without DNS, through the same path.
        let literal = try await resolver.answer(host: "::1", port: 443, on: loop).get()
        #expect(literal.v6.map(\.ipAddress) == ["::1"] && literal.v4.isEmpty)
    }
}
