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
            return try CaptureDatabase(paths: paths, readOnly: readOnly)
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
