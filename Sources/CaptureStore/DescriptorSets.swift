import BusymateShared
import Foundation
import Synchronization

/// The descriptor sets `grpc.descriptor_sets` names, as the processes that
/// show captures read them (`busymate show`, the web page's detail; never
/// the tunnel): one schema from all of them, and a line for each file that
/// could not be used, so the view says why it shows numbers.
public struct DescriptorSets: Sendable {
    public var schema: ProtobufSchema?
    /// One line per file that could not be read or is no descriptor set.
    public var problems: [String]

    public init(schema: ProtobufSchema?, problems: [String]) {
        self.schema = schema
        self.problems = problems
    }

    /// Larger files are refused unread (all of googleapis is a few MiB).
    public static let sizeLimit = 64 << 20

    /// `paths` as settings give them: absolute, or relative to the group directory.
    public static func url(_ path: String, group: URL) -> URL {
        path.hasPrefix("/") ? URL(fileURLWithPath: path) : group.appendingPathComponent(path)
    }

    /// The sets the group's settings name (`grpc.descriptor_sets`); none
    /// when settings.json does not parse. Blocks: call it off any event loop.
    public static func named(in paths: GroupPaths, cache: Cache? = nil) -> DescriptorSets {
        load(SettingsFile.read(paths.settings).settings?.grpcDescriptorSets ?? [], group: paths.root, cache: cache)
    }

    /// Reads and merges the files (the first to define a name keeps it).
    /// Blocks: call it off any event loop.
    public static func load(_ paths: [String], group: URL, cache: Cache? = nil) -> DescriptorSets {
        guard !paths.isEmpty else { return DescriptorSets(schema: nil, problems: []) }
        var schema = ProtobufSchema()
        var problems: [String] = []
        var loaded = 0
        for path in paths {
            let url = url(path, group: group)
            let result = cache?.parsed(url) ?? parse(url)
            switch result {
            case let .success(one):
                schema.merge(one)
                loaded += 1
            case let .failure(failure):
                problems.append("descriptor set \(path): \(failure.description); its fields are shown by number")
            }
        }
        return DescriptorSets(schema: loaded > 0 ? schema : nil, problems: problems)
    }

    static func parse(_ url: URL) -> Result<ProtobufSchema, ProtobufDescriptorSet.Failure> {
        let data: Data
        do {
            data = try GroupFileReader.read(url, limit: sizeLimit)
        } catch {
            return .failure(ProtobufDescriptorSet.Failure(description: error.isMissing ? "no such file" : error.description))
        }
        return ProtobufDescriptorSet.parse(data).mapError {
            ProtobufDescriptorSet.Failure(
                description: "not a FileDescriptorSet (make one with protoc --include_imports -o FILE.pb …): \($0.description)")
        }
    }

    /// Parsed files kept while they are unchanged (same inode, size and
    /// modification time), so each detail the page asks for does not parse
    /// them again.
    public final class Cache: Sendable {
        struct Stamp: Equatable {
            var inode: UInt64
            var size: Int64
            var modified: Int
            var nanoseconds: Int
        }

        private let entries = Mutex<[URL: (Stamp, Result<ProtobufSchema, ProtobufDescriptorSet.Failure>)]>([:])

        public init() {}

        func parsed(_ url: URL) -> Result<ProtobufSchema, ProtobufDescriptorSet.Failure> {
            var st = stat()
            guard lstat(url.path, &st) == 0 else { return DescriptorSets.parse(url) }
            let stamp = Stamp(
                inode: UInt64(st.st_ino), size: Int64(st.st_size), modified: st.st_mtim.tv_sec, nanoseconds: st.st_mtim.tv_nsec)
            if let (kept, result) = entries.withLock({ $0[url] }), kept == stamp { return result }
            let result = DescriptorSets.parse(url)
            entries.withLock { $0[url] = (stamp, result) }
            return result
        }
    }
}
