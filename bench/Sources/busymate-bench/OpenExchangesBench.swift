import BusymateShared
import CaptureStore
import Foundation
import ProxyEngine

/// What following exchanges in flight costs the data path: one `opened`
/// and one `closed` per exchange, with 100 open at a time, timed in this
/// process over a million exchanges (a throughput cell's noise on this
/// machine is far larger than the figure).
enum OpenExchangesBench {
    static func nanosecondsPerExchange() -> Double {
        let open = OpenExchanges()
        // As `ExchangeCapture` makes them: a fresh request id each (version 7 UUIDs).
        let entries = (0..<1_000).map { i in
            OpenExchangesFile.Entry(
                requestID: RequestID.make(), startedAt: Date(), method: "GET", url: "https://localhost:8443/1k?\(i)",
                client: "127.0.0.1:50000")
        }
        let count = 1_000_000
        let start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<count {
            open.opened(entries[i % entries.count])
            if i >= 100 { open.closed(entries[(i - 100) % entries.count].requestID) }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
    }
}
