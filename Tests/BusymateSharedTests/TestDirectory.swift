import Foundation

@testable import BusymateShared

/// A fresh directory under /tmp (short paths: Unix socket paths are capped
/// at 107 bytes), removed when the test ends.
final class TestDirectory {
    let url: URL
    init() throws {
        url = URL(fileURLWithPath: "/tmp/bmt-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    var path: String { url.path }
}

extension AppSettings {
    /// Why `text` is refused, or nil when it reads.
    static func decodeError(_ text: String) -> SettingsError? {
        do {
            _ = try decode(text)
            return nil
        } catch {
            return error
        }
    }
}
