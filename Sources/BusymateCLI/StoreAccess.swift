import BusymateShared
import CaptureStore
import Foundation

enum StoreAccess {
    /// The capture store of `paths`, or a clear error when there is none yet.
    static func open(_ paths: GroupPaths, readOnly: Bool = true) throws -> CaptureDatabase {
        guard FileManager.default.fileExists(atPath: paths.captureDatabase.path) else {
            throw CLIError(
                description: "no capture store at \(paths.captureDatabase.path) yet (the tunnel creates it when it starts; "
                    + "another group? --group DIR or \(GroupPaths.environmentKey)=DIR)")
        }
        do {
            // The CLI never migrates or chmods the store: that is the tunnel's.
            return try CaptureDatabase(paths: paths, readOnly: readOnly, owner: false)
        } catch  where StoreHealth.isCorruption(error) {
            throw CLIError(description: "\(paths.captureDatabase.path): \(StoreHealth.describe(error))\(StoreHealth.advice(error))")
        } catch {
            throw CLIError(
                description: "cannot open \(paths.captureDatabase.path): \(error) (run as root or as a member of group busymate)")
        }
    }
}

extension StoreAccess {
    /// An exchange by its id, its request id, or the start of a request id
    /// (at least 4 characters, and only one exchange's).
    static func exchange(_ text: String, in traffic: TrafficRepository) throws -> ExchangeRecord {
        if let id = Int64(text), let record = try traffic.find(id: id) {
            return record
        }
        if Int64(text) != nil && text.count < 4 { throw CLIError(description: "no exchange \(text)") }
        let prefix = text.lowercased()
        guard prefix.count >= 4, prefix.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw CLIError(description: "\(text) is neither an exchange id (a number from `busymate list`) nor a request id")
        }
        let found = try traffic.find(requestIDPrefix: prefix, limit: 2)
        guard let record = found.first else { throw CLIError(description: "no exchange has a request id starting \(text)") }
        guard found.count == 1 else {
            throw CLIError(description: "several request ids start \(text): give more of it, or the exchange id")
        }
        return record
    }

    /// The id of the exchange `record` was resent from, when it is still stored.
    static func resentFrom(_ record: ExchangeRecord, in traffic: TrafficRepository) throws -> Int64? {
        try record.resentFrom.flatMap { try traffic.find(requestID: $0)?.id }
    }
}

extension ExchangeJSON {
    static func write(_ node: JSONNode) {
        FileHandle.standardOutput.write(Data(JSONWriter.write(node).utf8))
    }
}
