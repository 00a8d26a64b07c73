import Testing

@testable import Cloud

@Suite struct CloudEndpointTests {
    @Test func theSchemeIsKeptAsChecked() throws {
        #expect(
            try CloudEndpoint(api: "HTTPS://project.supabase.co/", anonKey: "k").base == "https://project.supabase.co",
            "an upper-case HTTPS stays https (Realtime's URL is made from it: wss, never ws)")
        #expect(try CloudEndpoint(api: "Http://127.0.0.1:8000", anonKey: "k").base == "http://127.0.0.1:8000")
        #expect(throws: CloudEndpoint.Invalid.self) { try CloudEndpoint(api: "HTTP://example.com", anonKey: "k") }
    }
}
