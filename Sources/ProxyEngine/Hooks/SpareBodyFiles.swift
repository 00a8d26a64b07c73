import CaptureStore
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Body files of pruned exchanges, kept to be written over by new bodies.
/// Once the store is full every new body file means an old one goes, and
/// on ext4 a new inode and a freed one were the dearest part of storing a
/// body (the inode search alone was a quarter of the file writers' time).
/// Only small files are kept, and few: spares hold at most
/// `capacity × largest` bytes of disk beyond `capture.max_bytes`. Unused
/// spares are swept with the orphans at the next start.
public final class SpareBodyFiles: Sendable {
    static let capacity = 32
    static let largest = 4 << 20
    static let suffix = ".spare"

    private let store: BodyStore
    private let names = Mutex<[String]>([])
    private let counter = Atomic<Int>(0)

    public init(store: BodyStore) { self.store = store }

    /// Removes the files of pruned exchanges, keeping some as spares.
    public func retire(_ files: [String]) {
        for name in files {
            let path = store.url(name).path
            // A socket's file may still have writes queued: reused, they would land in another body.
            if name.hasSuffix(".messages") {
                unlink(path)
                continue
            }
            var info = stat()
            if stat(path, &info) == 0, info.st_size <= Self.largest, names.withLock({ $0.count < Self.capacity }) {
                let spare = "\(counter.add(1, ordering: .relaxed).newValue)\(Self.suffix)"
                if rename(path, store.url(spare).path) == 0 {
                    names.withLock { $0.append(spare) }
                    continue
                }
            }
            unlink(path)
        }
    }

    /// Renames a spare to `path`; false when there is none.
    func take(as path: String) -> Bool {
        while let spare = names.withLock({ $0.popLast() }) {
            if rename(store.url(spare).path, path) == 0 { return true }
        }
        return false
    }
}
