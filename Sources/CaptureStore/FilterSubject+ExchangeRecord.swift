import BusymateShared
import Foundation

extension FilterSubject {
    /// A stored row as the in-memory matcher reads it: what the store's
    /// SQL functions read of it (a body whole from its file when it has
    /// one, its Content-Encoding undone).
    public init(_ record: ExchangeRecord, bodies: BodyStore) {
        self.init(
            method: record.method, url: record.url, host: record.host, scheme: record.scheme,
            tls: CaptureFilter.TLS(rawValue: record.tlsMode.rawValue) ?? .none, startedAt: record.startedAt)
        httpVersion = record.httpVersion
        requestHeaders = ExchangeRecord.decodeHeaders(record.requestHeaders)
        responseHeaders = record.responseHeaders.map { ExchangeRecord.decodeHeaders($0) }
        status = record.status
        requestBody = Self.text(of: record, .request, headers: requestHeaders, bodies)
        responseBody = Self.text(of: record, .response, headers: responseHeaders ?? [], bodies)
        client = record.clientAddress
        server = record.serverAddress
        device = record.device
        error = record.error
        marker = record.marker
        comment = record.comment
        rules = record.rule
        resent = record.resentFrom != nil
    }

    private static func text(of record: ExchangeRecord, _ direction: BodyStore.Direction, headers: [(String, String)], _ bodies: BodyStore)
        -> String?
    {
        let (file, inline) =
            direction == .request ? (record.requestBodyFile, record.requestBody) : (record.responseBodyFile, record.responseBody)
        var body = inline
        if let file, let whole = try? bodies.read(file) { body = whole }
        guard var data = body, !data.isEmpty else { return nil }
        if let encoding = headers.first(where: { $0.0.caseInsensitiveCompare("content-encoding") == .orderedSame })?.1,
            let decoded = BodyDecoder.decode(data, encoding: encoding)
        {
            data = decoded
        }
        return String(decoding: data, as: UTF8.self)
    }
}
