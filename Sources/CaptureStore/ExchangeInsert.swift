import Foundation
import GRDB
import GRDBSQLite

/// The writer's insert, bound through SQLite's C API on GRDB's cached
/// statement: GRDB's `StatementArguments` boxed each of the 49 values, and
/// that was as dear as SQLite's own work. Used inside a GRDB write.
struct ExchangeInsert {
    private let db: Database
    private let statement: SQLiteStatement
    /// SQLITE_TRANSIENT: SQLite copies what it is given.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ db: Database) throws {
        self.db = db
        statement = try db.cachedStatement(sql: ExchangeRecord.insertSQL).sqliteStatement
    }

    func execute(_ r: ExchangeRecord) throws {
        defer { sqlite3_reset(statement) }
        var i: Int32 = 0
        var code = SQLITE_OK
        func next() -> Int32 {
            i += 1
            return i
        }
        func bind(_ text: String?) {
            let index = next()
            guard code == SQLITE_OK else { return }
            guard var text else {
                code = sqlite3_bind_null(statement, index)
                return
            }
            code = text.withUTF8 { bytes in
                // An empty string is still text, not NULL.
                guard let base = bytes.baseAddress, !bytes.isEmpty else {
                    return sqlite3_bind_text(statement, index, "", 0, Self.transient)
                }
                return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(statement, index, $0, Int32(bytes.count), Self.transient)
                }
            }
        }
        func bind(_ number: Int?) {
            let index = next()
            guard code == SQLITE_OK else { return }
            code = number.map { sqlite3_bind_int64(statement, index, Int64($0)) } ?? sqlite3_bind_null(statement, index)
        }
        func bind(_ flag: Bool) { bind(flag ? 1 : 0) }
        func bind(_ date: Date?) { bind(date.map(DatabaseDateText.string)) }
        func bind(_ data: Data?) {
            let index = next()
            guard code == SQLITE_OK else { return }
            guard let data else {
                code = sqlite3_bind_null(statement, index)
                return
            }
            code = data.withUnsafeBytes { bytes in
                // An empty blob is still a blob, not NULL.
                bytes.baseAddress.map { sqlite3_bind_blob(statement, index, $0, Int32(bytes.count), Self.transient) }
                    ?? sqlite3_bind_zeroblob(statement, index, 0)
            }
        }
        // The order of `ExchangeRecord.insertSQL`.
        bind(r.requestID)
        bind(r.startedAt as Date?)
        bind(r.connectedAt)
        bind(r.tlsDoneAt)
        bind(r.firstByteAt)
        bind(r.endedAt)
        bind(r.clientAddress)
        bind(r.serverAddress)
        bind(r.scheme)
        bind(r.method)
        bind(r.host)
        bind(r.port as Int?)
        bind(r.path)
        bind(r.url)
        bind(r.httpVersion)
        bind(r.status)
        bind(r.reason)
        bind(r.requestHeaders)
        bind(r.responseHeaders)
        bind(r.requestBodySize as Int?)
        bind(r.responseBodySize as Int?)
        bind(r.requestBody)
        bind(r.responseBody)
        bind(r.requestBodyTruncated)
        bind(r.responseBodyTruncated)
        bind(r.requestBodyFile)
        bind(r.responseBodyFile)
        bind(r.requestBodyDecodedSize)
        bind(r.responseBodyDecodedSize)
        bind(r.storedBytes as Int?)
        bind(r.tlsMode.rawValue)
        bind(r.sni)
        bind(r.tlsVersion)
        bind(r.tlsCipher)
        bind(r.error)
        bind(r.bytesUp)
        bind(r.bytesDown)
        bind(r.resentFrom)
        bind(r.rule)
        bind(r.imported)
        bind(r.device)
        bind(r.frontEnd)
        bind(r.marker)
        bind(r.comment)
        bind(r.note)
        bind(r.streamID)
        bind(r.connectionID)
        bind(r.requestTrailers)
        bind(r.responseTrailers)
        if code == SQLITE_OK { code = sqlite3_step(statement) }
        guard code == SQLITE_DONE else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                sql: ExchangeRecord.insertSQL)
        }
    }
}
