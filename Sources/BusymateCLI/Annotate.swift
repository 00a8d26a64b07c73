import BusymateShared
import CaptureStore
import Foundation

/// The store write both commands share: ids resolved first (one bad id
/// changes nothing), then one transaction.
enum Annotate {
    static func apply(
        _ change: AnnotationRepository.Change, to ids: [String], paths: GroupPaths, json: Bool,
        say: (ExchangeRecord) -> String
    ) throws {
        do {
            try AnnotationRepository.validate(change)
        } catch {
            throw CLIError(description: error.description)
        }
        let database = try StoreAccess.open(paths, readOnly: false)
        let traffic = TrafficRepository(database: database)
        let records = try ids.map { try StoreAccess.exchange($0, in: traffic) }
        let keys = records.compactMap(\.id)
        try AnnotationRepository(database: database).annotate(keys, change)
        let now = try keys.compactMap { try traffic.find(id: $0) }
        if json {
            ExchangeJSON.write(
                ExchangeJSON.array(
                    now.map { r in
                        ExchangeJSON.object([
                            ("id", ExchangeJSON.number(r.id)), ("marker", ExchangeJSON.string(r.marker)),
                            ("comment", ExchangeJSON.string(r.comment)),
                        ])
                    }))
        } else {
            for record in now { print(say(record)) }
        }
    }
}
