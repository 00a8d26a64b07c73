import BusymateShared
import CaptureStore
import Testing

@testable import WebFront

/// Which reads take the slow threads: body searches and regular
/// expressions, not plain text, hosts, codes or no filter.
@Suite struct QueryLaneTests {
    func lane(_ text: String) throws -> QueryLane { QueryLane.of(try CaptureFilter.parse(text)) }

    @Test func bodySearchesAndRegularExpressionsAreSlow() throws {
        #expect(QueryLane.of(nil) == .cheap)
        for cheap in ["~c 200", "api", "~u /items/", "~d example.com", "~m POST & ~c 4xx", "~e | ~q", "~h content-type"] {
            #expect(try lane(cheap) == .cheap, "\(cheap)")
        }
        for slow in ["~b token", "~bs x", "!(~bq x)", "~u '(a+)+b'", "~c 200 & ~u a.*z", "~h 'x-[0-9]+'", "~d api | ~b secret"] {
            #expect(try lane(slow) == .slow, "\(slow)")
        }
    }
}
