import BusymateShared
import Foundation
import Synchronization

/// The settings in force while `settings.json` does not parse: the last
/// good file this web front read. The tunnel and the supervisor apply a
/// file only when it parses too, so these are the ones proxying uses. Kept
/// as bytes: the page gets each part as the file had it, keys this version
/// does not know included.
public final class SettingsInForce: Sendable {
    private let url: URL
    private let lastGood = Mutex<Data?>(nil)

    init(url: URL) { self.url = url }

    /// Where they come from, as `GET /api/settings` says it.
    enum Source: String {
        case file, lastGood = "last_good", defaults
    }

    /// The file as it is, and what is in force with it.
    func current(_ data: Data) -> (snapshot: SettingsSnapshot, inForce: Data, source: Source) {
        let snapshot = SettingsFile.parse(data)
        if snapshot.error == nil {
            lastGood.withLock { $0 = data }
            return (snapshot, data, .file)
        }
        guard let good = lastGood.withLock({ $0 }) else { return (snapshot, Data(), .defaults) }
        return (snapshot, good, .lastGood)
    }

    /// Read at start and on every change, so a file broken before the page
    /// asked still has its predecessor to show.
    public func reload() async {
        guard let data = await Self.read(url) else { return }
        _ = current(data)
    }

    @concurrent private static func read(_ url: URL) async -> Data? {
        try? GroupFileReader.read(url, limit: SettingsFile.sizeLimit)
    }
}
