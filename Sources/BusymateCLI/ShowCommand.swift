import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one exchange: headers, timing, TLS and bodies.")

    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id (from `busymate list`) or request id.") var id: String
    @Flag(help: "Print bodies exactly as stored.") var raw = false
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        let database = try StoreAccess.open(options.paths)
        let traffic = TrafficRepository(database: database)
        let bodies = BodyStore(paths: database.paths)
        guard let record = try Int64(id).flatMap({ try traffic.find(id: $0) }) ?? traffic.find(requestID: id) else {
            throw CLIError(description: "no exchange \(id)")
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            encoder.dataEncodingStrategy = .base64
            FileHandle.standardOutput.write(try encoder.encode(record) + Data("\n".utf8))
            return
        }
        var out: [String] = []
        out.append("\(record.method) \(record.url)")
        out.append("id \(record.id ?? 0) · request \(record.requestID) · \(record.tlsMode.rawValue)\(record.error.map { " · error: \($0)" } ?? "")")
        let t0 = record.startedAt
        func at(_ d: Date?) -> String { d.map { String(format: "+%.1fms", $0.timeIntervalSince(t0) * 1000) } ?? "-" }
        out.append("timing: started \(ISO8601DateFormatter().string(from: t0)), connected \(at(record.connectedAt)), TLS done \(at(record.tlsDoneAt)), first byte \(at(record.firstByteAt)), ended \(at(record.endedAt))")
        if let client = record.clientAddress { out.append("client \(client)\(record.serverAddress.map { " → server \($0)" } ?? "")") }
        if let original = record.resentFrom { out.append("resent from request \(original)") }
        if let rule = record.rule { out.append("rule: \(rule)") }
        for event in (try? BreakpointRepository(database: database).events(requestID: record.requestID)) ?? [] {
            let held = (event.resumedAt ?? Date()).timeIntervalSince(event.pausedAt)
            out.append(String(format: "breakpoint %lld: %@ held %.1f s, %@", event.id ?? 0, event.kind.rawValue, held, event.outcome?.rawValue ?? "still held"))
        }
        let tls = [record.sni.map { "SNI \($0)" }, record.tlsVersion, record.tlsCipher].compactMap { $0 }
        if !tls.isEmpty { out.append("tls: \(record.tlsMode.rawValue), " + tls.joined(separator: ", ") + (record.tlsMode == .mitm ? " (upstream)" : "")) }
        if let up = record.bytesUp, let down = record.bytesDown { out.append("tunnel: \(up) bytes up, \(down) bytes down") }
        out.append("")
        out.append("> \(record.method) \(record.path.isEmpty ? record.url : record.path) \(record.httpVersion ?? "HTTP/1.1")")
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) { out.append("> \(name): \(value)") }
        out.append(contentsOf: body(try bodies.body(of: record, .request), headers: record.requestHeaders, truncated: record.requestBodyTruncated,
                                    size: record.requestBodySize, file: record.requestBodyFile))
        if let status = record.status {
            out.append("")
            out.append("< \(status) \(record.reason ?? "")")
            for (name, value) in ExchangeRecord.decodeHeaders(record.responseHeaders) { out.append("< \(name): \(value)") }
            out.append(contentsOf: body(try bodies.body(of: record, .response), headers: record.responseHeaders, truncated: record.responseBodyTruncated,
                                        size: record.responseBodySize, file: record.responseBodyFile))
        }
        print(out.joined(separator: "\n"))
    }

    private func body(_ stored: Data?, headers: String?, truncated: Bool, size: Int, file: String?) -> [String] {
        guard var data = stored, !data.isEmpty else { return size > 0 ? ["", "(\(size) bytes, not stored)"] : [] }
        var lines = [""]
        if let file { lines.append("(\(data.count) bytes, stored in bodies/\(file))") }
        // Stored as received; decoded here, unless --raw.
        let encoding = ExchangeRecord.decodeHeaders(headers).first { $0.0.lowercased() == "content-encoding" }?.1.lowercased()
        if !raw, let encoding, !truncated {
            if let decoded = BodyDecoder.decode(data, encoding: encoding) {
                lines.append("(\(encoding), \(data.count) bytes, shown decoded: \(decoded.count) bytes)")
                data = decoded
            } else {
                lines.append("(\(encoding): cannot decode; shown as stored)")
            }
        }
        let contentType = ExchangeRecord.decodeHeaders(headers).first { $0.0.lowercased() == "content-type" }?.1.lowercased() ?? ""
        if !raw, contentType.contains("json"), let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
           let pretty = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]) {
            lines.append(String(decoding: pretty, as: UTF8.self))
        } else if let text = String(data: data, encoding: .utf8) {
            lines.append(text)
        } else {
            lines.append("(\(data.count) bytes of binary data)")
        }
        if truncated { lines.append("(stored \(stored?.count ?? 0) of \(size) bytes)") }
        return lines
    }
}
