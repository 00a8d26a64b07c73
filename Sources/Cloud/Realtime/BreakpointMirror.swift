import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOPosix

/// Mirrors `breakpoint_events` into the account as the seed writes them: a
/// row when a message is held (how the dashboard learns of it), its
/// resolution when it is resolved. Events from before this tunnel started
/// are not sent again; resolutions of the last ten minutes are (a row a
/// crash left open gets closed). A row the account refuses is logged and
/// passed over: sent again it would be refused again and hold back the rest.
struct BreakpointMirror: Sendable {
    let store: StoreHandle
    private let logger = Logger(label: "busymate.cloud.realtime")

    init(store: StoreHandle) { self.store = store }

    func run(_ link: RealtimeLink) async {
        var last: Int64?
        var open: Set<Int64> = []
        var failing = false
        while await !link.isStopping && !Task.isCancelled {
            await link.pause(failing ? 5 : 0.5)
            guard let api = await link.mirrorTarget() else { continue }
            let repository = BreakpointRepository(database: store.database)
            do {
                if last == nil {
                    let recent = try await NIOThreadPool.singleton.runIfActive { try repository.recent(limit: 200) }
                    for event in recent where (event.resumedAt.map { Date().timeIntervalSince($0) < 600 } ?? false) {
                        try await send(event) { try await api.resolve(event) }
                    }
                    last = recent.first?.id ?? 0
                }
                let after = last ?? 0
                let new = try await NIOThreadPool.singleton.runIfActive { try repository.events(after: after, limit: 50) }
                for event in new {
                    if try await send(event, { try await api.insert(event) }), event.outcome == nil, let id = event.id { open.insert(id) }
                    last = event.id
                }
                for id in open.sorted() {
                    let event = try await NIOThreadPool.singleton.runIfActive { try repository.find(id: id) }
                    guard let event, event.outcome != nil else {
                        if event == nil { open.remove(id) }
                        continue
                    }
                    try await send(event) { try await api.resolve(event) }
                    open.remove(id)
                }
                if failing { logger.notice("breakpoint events reach the account again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "cannot write breakpoint events to the account; trying again", metadata: ["ERROR": "\(CloudError.describe(error))"])
                }
                failing = true
            }
        }
    }

    /// One write; false when the account refuses that row for good.
    @discardableResult
    private func send(_ event: BreakpointEvent, _ write: () async throws -> Void) async throws -> Bool {
        do {
            try await write()
            return true
        } catch let refusal as CloudAPIError where refusal.refusesTheRow {
            logger.error(
                "the account refuses a breakpoint event; it stays local",
                metadata: ["REQUEST_ID": "\(event.requestID)", "ERROR": "\(refusal)"])
            return false
        }
    }
}
