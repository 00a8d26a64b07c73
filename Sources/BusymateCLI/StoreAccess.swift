import BusymateShared
import CaptureStore
import Foundation

enum StoreAccess {
    /// The capture store of `paths`, or a clear error when there is none yet.
    static func open(_ paths: GroupPaths, readOnly: Bool = true) throws -> CaptureDatabase {
        guard FileManager.default.fileExists(atPath: paths.captureDatabase.path) else {
            throw CLIError(description: "no capture store at \(paths.captureDatabase.path) yet (the tunnel creates it when it starts)")
        }
        do {
            // The CLI never migrates or chmods the store: that is the tunnel's.
            return try CaptureDatabase(paths: paths, readOnly: readOnly, owner: false)
        } catch where StoreHealth.isCorruption(error) {
            throw CLIError(description: "\(paths.captureDatabase.path): \(StoreHealth.describe(error))\(StoreHealth.advice(error))")
        } catch {
            throw CLIError(description: "cannot open \(paths.captureDatabase.path): \(error) (run as root or as a member of group busymate)")
        }
    }
}

extension ExchangeRecord {
    var durationMilliseconds: Int? {
        endedAt.map { Int(($0.timeIntervalSince(startedAt) * 1000).rounded()) }
    }
}
