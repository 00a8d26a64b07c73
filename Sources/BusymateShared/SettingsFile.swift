import Crypto
import Foundation

/// One read of `settings.json`: the decoded settings, or why they are not
/// usable, with the SHA-256 of exactly the bytes read.
public struct SettingsSnapshot: Sendable, Equatable {
    public var sha256: String
    public var result: Result<AppSettings, SettingsError>
    public var unknownKeys: [String]

    public var settings: AppSettings? { try? result.get() }
    public var error: SettingsError? {
        if case let .failure(e) = result { return e }
        return nil
    }
}

public enum SettingsFile {
    /// Larger files are refused unread: a 50 MB one once stalled both
    /// processes for seconds. Settings with hundreds of rules fit in 64 KiB.
    public static let sizeLimit = 4 << 20

    public static func read(_ url: URL) -> SettingsSnapshot {
        let data: Data
        do {
            data = try GroupFileReader.read(url, limit: sizeLimit)
        } catch {
            return SettingsSnapshot(sha256: "", result: .failure(SettingsError(message: error.description, position: nil)), unknownKeys: [])
        }
        return parse(data)
    }

    public static func parse(_ data: Data) -> SettingsSnapshot {
        let digest = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
        do {
            let root = try JSONParser.parse(Array(data))
            let decoded = try AppSettings.decode(root)
            return SettingsSnapshot(sha256: digest, result: .success(decoded.settings), unknownKeys: decoded.unknownKeys)
        } catch let error as JSONParser.Error {
            return SettingsSnapshot(
                sha256: digest, result: .failure(SettingsError(message: error.message, position: error.position)), unknownKeys: [])
        } catch let error as SettingsError {
            return SettingsSnapshot(sha256: digest, result: .failure(error), unknownKeys: [])
        } catch {
            return SettingsSnapshot(sha256: digest, result: .failure(SettingsError(message: "\(error)", position: nil)), unknownKeys: [])
        }
    }

    /// Applies `edit` to the document and writes it atomically; keys this
    /// version does not know survive. Refuses to touch an invalid file. An
    /// edit that changes nothing writes nothing (every write reloads every
    /// process). `requireLock`: refuse rather than edit without the lock.
    public static func edit(_ url: URL, requireLock: Bool = false, _ edit: (inout JSONNode) throws -> Void) throws {
        // One edit at a time (two `busymate devices add` at once each read
        // the file before the other wrote it): an advisory lock beside it,
        // which a read-only descriptor can take too. Waited for at most 5 s:
        // anyone who can read the lock file can hold it.
        let lockPath = url.deletingLastPathComponent().appendingPathComponent(".settings.lock").path
        let lock = open(lockPath, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o660)
        if lock >= 0 {
            // The group's (made by root under a strict umask, it could not
            // open it); not the world's: anyone who can open it can hold it.
            _ = fchmod(lock, 0o660)
            var waited = 0
            while flock(lock, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EINTR, waited < 250 else {
                    close(lock)
                    throw SettingsError(
                        message: "settings.json is being edited by another process (\(lockPath) stayed locked for 5 s); try again",
                        position: nil)
                }
                usleep(20_000)
                waited += 1
            }
        } else if requireLock {
            throw SettingsError(
                message: "cannot open \(lockPath) (\(String(cString: strerror(errno)))): settings.json is not edited without it",
                position: nil)
        }
        defer { if lock >= 0 { close(lock) } }
        let data = try GroupFileReader.read(url, limit: sizeLimit)
        var root: JSONNode
        do {
            root = try JSONParser.parse(Array(data))
        } catch {
            throw SettingsError(message: "settings.json is not valid JSON (\(error)); fix it first", position: error.position)
        }
        let before = root
        try edit(&root)
        guard root != before else { return }
        let text = JSONWriter.write(root)
        _ = try AppSettings.decode(text)
        do {
            try AtomicFile.write(Data(text.utf8), to: url, mode: 0o664)
        } catch {
            // A group member may not replace root's file in the sticky group
            // directory, but may write it: do that instead.
            // Written over from its start, then cut to length: never empty
            // meanwhile (a reader may see it half written, and keeps the
            // last good settings when it does not parse).
            try AtomicFile.overwriteInPlace(Data(text.utf8), at: url, sync: true)
        }
    }

    /// The array of strings at `path` (e.g. ["ssl_proxying", "include"]),
    /// creating objects on the way; used by the CLI's edits.
    public static func strings(in root: JSONNode, at path: [String]) -> [String] {
        var node: JSONNode? = root
        for key in path { node = node?[key] }
        guard case let .array(items)? = node?.value else { return [] }
        return items.compactMap { if case let .string(s) = $0.value { return s } else { return nil } }
    }

    public static func setStrings(_ values: [String], in root: inout JSONNode, at path: [String]) {
        guard let key = path.first else { return }
        if path.count == 1 {
            root.set(key, JSONNode(.array(values.map { JSONNode(.string($0)) })))
            return
        }
        var child = root[key] ?? JSONNode(.object([]))
        if case .object = child.value {} else { child = JSONNode(.object([])) }
        setStrings(values, in: &child, at: Array(path.dropFirst()))
        root.set(key, child)
    }
}
