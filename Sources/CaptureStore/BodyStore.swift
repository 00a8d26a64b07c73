import BusymateShared
import Foundation

/// Bodies too large to keep in the row: files under the group's `bodies/`,
/// named after the exchange's request id.
public struct BodyStore: Sendable {
    public enum Direction: String, Sendable { case request, response }

    public let directory: URL

    public init(paths: GroupPaths) { directory = paths.bodies }

    public static func fileName(requestID: String, _ direction: Direction) -> String { "\(requestID).\(direction.rawValue)" }

    public func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// The largest body file read back whole.
    public static let readLimit = 4 << 30

    /// The stored body of `record` in `direction`: its file when it has one,
    /// else the inline bytes. Throws when the row names a file that is gone,
    /// or one that is not a plain file right in `bodies/`.
    public func body(of record: ExchangeRecord, _ direction: Direction) throws -> Data? {
        let (file, inline) =
            direction == .request ? (record.requestBodyFile, record.requestBody) : (record.responseBodyFile, record.responseBody)
        guard let file else { return inline }
        do {
            return try read(file)
        } catch {
            let row = record.id.map { "exchange \($0)" } ?? "an exchange"
            throw BodyStoreError(description: "\(row)'s \(direction.rawValue) body file: \(error.description)")
        }
    }

    /// A body file by the name a row gives. Rows are group-writable and
    /// root's CLI reads them: the name is one plain name, opened beneath
    /// `bodies/` with no link followed (`../../etc/shadow` or a planted
    /// symlink is an error, never read).
    public func read(_ name: String) throws(GroupFileReader.Failure) -> Data {
        try GroupFileReader.read(beneath: directory, name: name, limit: Self.readLimit)
    }

    /// A window of a body file, and the file's size.
    public func read(_ name: String, offset: Int, length: Int) throws(GroupFileReader.Failure) -> (data: Data, total: Int) {
        try GroupFileReader.read(beneath: directory, name: name, offset: offset, length: length)
    }

    /// Removes body files; a file already gone is not an error, and a name
    /// that is not one plain name is not removed.
    @discardableResult
    public func remove(_ names: [String]) -> Int {
        let dir = open(directory.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dir >= 0 else { return 0 }
        defer { close(dir) }
        return names.reduce(0) { removed, name in
            GroupFileReader.isPlainName(name) && unlinkat(dir, name, 0) == 0 ? removed + 1 : removed
        }
    }

    /// Files no row names and not written to for `olderThan` seconds: left
    /// by a tunnel that died between writing a body and committing its row.
    public func orphans(referenced: Set<String>, olderThan age: TimeInterval = 60) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        let cutoff = Date().addingTimeInterval(-age)
        return names.filter { name in
            // `.spare`: a pruned body file the last tunnel kept for reuse.
            guard !referenced.contains(name),
                name.hasSuffix(".request") || name.hasSuffix(".response") || name.hasSuffix(".messages")
                    || name.hasSuffix(".spare")
            else { return false }
            let modified = (try? FileManager.default.attributesOfItem(atPath: url(name).path))?[.modificationDate] as? Date
            return (modified ?? .distantPast) < cutoff
        }
    }
}

public struct BodyStoreError: Error, CustomStringConvertible {
    public var description: String
}
