import BusymateShared
import Foundation
import NIOCore
import NIOFileSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Which file a `map_local` rule serves for a request, and how. A
/// directory rule serves the request path below the pattern's fixed
/// prefix (`cdn.test/static/*` with `/srv/www`: `/static/js/a.js` is
/// `/srv/www/js/a.js`), `index.html` for a directory. Nothing outside the
/// root is ever served: `..` in any spelling and symlinks that lead out are
/// refused, by resolving the real path and checking it is under the root's.
enum MapLocal {
    /// What `serve` may read: a mock is not a file server for disks.
    static let largestFile = 64 << 20

    struct Refusal: Error, CustomStringConvertible {
        var status: Int
        var description: String
    }

    /// The real path of the file to serve for `path` (origin-form, query included).
    static func file(for rule: Rule, file: String?, directory: String?, path: String) -> Result<String, Refusal> {
        // A file rule's own path may be a link the user made: served as what it leads to.
        if let file { return .success(realPath(file) ?? file) }
        guard let directory else { return .failure(Refusal(status: 500, description: "the rule names no file or directory")) }
        // The request path without its query, decoded once.
        let rawPath = String(path.prefix { $0 != "?" && $0 != "#" })
        guard let decoded = rawPath.removingPercentEncoding, !decoded.contains("\0") else {
            return .failure(Refusal(status: 400, description: "the request path does not decode"))
        }
        var rest = Substring(decoded)
        let prefix = rule.match.pathPrefix
        if rest.hasPrefix(prefix) { rest = rest.dropFirst(prefix.count) }
        let segments = rest.split(separator: "/", omittingEmptySubsequences: true)
        if segments.contains(where: { $0 == ".." }) {
            return .failure(Refusal(status: 403, description: "the path climbs out of the mapped directory"))
        }
        var candidate = ([directory] + segments.map(String.init)).joined(separator: "/")
        if rest.isEmpty || rest.hasSuffix("/") || isDirectory(candidate) { candidate += "/index.html" }
        guard let root = realPath(directory) else {
            return .failure(Refusal(status: 500, description: "the mapped directory \(directory) is missing"))
        }
        guard let real = realPath(candidate) else {
            return .failure(Refusal(status: 404, description: "no file for \(decoded) under \(directory)"))
        }
        guard real.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
            return .failure(Refusal(status: 403, description: "the path leads out of the mapped directory"))
        }
        return .success(real)
    }

    /// Reads `path` (a real path: no link in it) whole; a refusal says why
    /// not. Opened without following a link and without blocking (through
    /// its directory: NIOFileSystem then opens non-blocking), so a FIFO or a
    /// device swapped in is refused by what was opened, never waited on.
    static func read(_ path: String) async -> Result<ByteBuffer, Refusal> {
        let file = FilePath(path)
        guard let name = file.lastComponent else { return .failure(Refusal(status: 404, description: "\(path) is missing")) }
        do {
            return try await FileSystem.shared.withDirectoryHandle(atPath: file.removingLastComponent()) { directory in
                try await directory.withFileHandle(
                    forReadingAt: FilePath(name.string), options: .init(followSymbolicLinks: false, closeOnExec: true)
                ) { handle in
                    let info = try await handle.info()
                    guard info.type == .regular else { return .failure(Refusal(status: 403, description: "\(path) is not a regular file")) }
                    guard info.size <= largestFile else { return .failure(Refusal(status: 500, description: "\(path) is over 64 MiB")) }
                    return .success(try await handle.readToEnd(maximumSizeAllowed: .bytes(Int64(largestFile))))
                }
            }
        } catch let error as FileSystemError where error.code == .notFound {
            return .failure(Refusal(status: 404, description: "\(path) is missing"))
        } catch let error as FileSystemError where error.code == .resourceExhausted {
            return .failure(Refusal(status: 500, description: "\(path) is over 64 MiB"))
        } catch {
            return .failure(Refusal(status: 403, description: "\(path) cannot be read"))
        }
    }

    static func contentType(_ path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "json": return "application/json"
        case "html", "htm": return "text/html; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "txt", "log": return "text/plain; charset=utf-8"
        case "xml": return "application/xml"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "ico": return "image/x-icon"
        case "wasm": return "application/wasm"
        case "pdf": return "application/pdf"
        case "woff2": return "font/woff2"
        default: return "application/octet-stream"
        }
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}
