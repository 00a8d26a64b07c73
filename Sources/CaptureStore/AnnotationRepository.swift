import Foundation
import GRDB

/// A user's marks and comments on stored exchanges (`busymate mark`, the
/// page). Written by whoever the user is (root's CLI, a group member, the
/// web front): two columns of rows the tunnel has already committed.
public struct AnnotationRepository: Sendable {
    public let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    /// What to change: nil leaves a field as it is; `.some(nil)` clears it.
    public struct Change: Sendable, Equatable {
        public var marker: String??
        public var comment: String??

        public init(marker: String?? = nil, comment: String?? = nil) {
            self.marker = marker
            self.comment = comment
        }

        public var isEmpty: Bool { marker == nil && comment == nil }
    }

    /// Refused before anything is written: what the user typed, and why.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// A marker is a short word or emoji (mitmproxy's are one character or
    /// `:name:`); a comment a note. Bounded: rows are read by the page.
    public static let maxMarker = 64
    public static let maxComment = 4_096
    /// Characters can be any number of combining scalars: bytes bound too.
    public static let maxMarkerBytes = 256
    public static let maxCommentBytes = 16_384

    public static func validate(_ change: Change) throws(Invalid) {
        if case let .some(.some(marker)) = change.marker {
            guard !marker.isEmpty else { throw Invalid(description: "a marker cannot be empty (remove the mark instead)") }
            guard marker.count <= maxMarker, marker.utf8.count <= maxMarkerBytes else {
                throw Invalid(description: "a marker is at most \(maxMarker) characters (\(maxMarkerBytes) bytes)")
            }
            guard !marker.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw Invalid(description: "a marker cannot hold control characters")
            }
        }
        if case let .some(.some(comment)) = change.comment {
            guard comment.count <= maxComment, comment.utf8.count <= maxCommentBytes else {
                throw Invalid(description: "a comment is at most \(maxComment) characters (\(maxCommentBytes) bytes)")
            }
            guard !comment.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" }) else {
                throw Invalid(description: "a comment cannot hold control characters other than newlines and tabs")
            }
        }
    }

    /// Applies `change` to the exchanges with these ids, in one
    /// transaction; answers the ids that exist (and were changed). An empty
    /// comment clears it.
    @discardableResult
    public func annotate(_ ids: [Int64], _ change: Change) throws -> [Int64] {
        try Self.validate(change)
        guard !change.isEmpty, !ids.isEmpty else { return [] }
        var assignments: [String] = []
        var arguments: StatementArguments = []
        if let marker = change.marker {
            assignments.append("marker = ?")
            _ = arguments.append(contentsOf: [marker])
        }
        if let comment = change.comment {
            assignments.append("comment = ?")
            _ = arguments.append(contentsOf: [comment.flatMap { $0.isEmpty ? nil : $0 }])
        }
        let set = assignments.joined(separator: ", ")
        return try database.pool.write { db in
            var changed: [Int64] = []
            for id in ids {
                try db.execute(sql: "UPDATE exchanges SET \(set) WHERE id = ?", arguments: arguments + [id])
                if db.changesCount > 0 { changed.append(id) }
            }
            return changed
        }
    }
}
