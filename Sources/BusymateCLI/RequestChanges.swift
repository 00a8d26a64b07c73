import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation
import ProxyClient

/// What `resend` changes in a stored request, and what `compose` builds
/// one from: the method, the URL, headers, the body, or the whole raw
/// request in `$EDITOR` (re-framed: Content-Length is recomputed).
struct RequestChanges: ParsableArguments {
    @Option(help: "The method.") var method: String?
    @Option(help: "The URL (http:// or https://).") var url: String?
    @Option(
        name: .customLong("header"),
        help: ArgumentHelp("'Name: value' sets a header (repeatable); 'Name:' removes it.", valueName: "header"))
    var headers: [String] = []
    @Option(help: "The body, from a file (- for standard input).") var bodyFile: String?
    @Flag(help: "Edit the whole request (request line, headers, body) in $EDITOR before it is sent.") var edit = false

    typealias Request = OutgoingRequest

    func apply(to request: inout Request) throws {
        if let method {
            guard !method.isEmpty, method.allSatisfy({ $0.isLetter || $0 == "-" }) else {
                throw CLIError(description: "--method \(method): not a method name")
            }
            request.method = method.uppercased()
        }
        if let url { request.url = try Self.checked(url, flag: "--url") }
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw CLIError(description: "--header \(header): write it as 'Name: value' ('Name:' removes the header)")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_!#$%&'*+.^`|~".contains($0)) }) else {
                throw CLIError(description: "--header \(header): \"\(name)\" is not a header name")
            }
            let at = request.headers.firstIndex { $0.0.caseInsensitiveCompare(name) == .orderedSame }
            request.headers.removeAll { $0.0.caseInsensitiveCompare(name) == .orderedSame }
            if !value.isEmpty { request.headers.insert((name, value), at: min(at ?? request.headers.count, request.headers.count)) }
        }
        if let bodyFile {
            do {
                request.body =
                    bodyFile == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: bodyFile))
            } catch {
                throw CLIError(description: "--body-file \(bodyFile): \(error.localizedDescription)")
            }
        }
        if edit { request = try Self.edited(request) }
    }

    /// The request as raw HTTP (absolute URL in the request line) in the editor, read back.
    static func edited(_ request: Request) throws -> Request {
        let raw = RawHTTPMessage(
            start: .request(method: request.method, target: request.url, version: "HTTP/1.1"),
            headers: request.headers.map { (name: $0.0, value: $0.1) }, body: Array(request.body))
        let saved = try RawMessageEditor.edit(Data(raw.rendered()), name: "busymate-request")
        let message: RawHTTPMessage
        do {
            message = try RawHTTPMessage.parse(Array(saved), as: .request)
        } catch {
            throw CLIError(description: "the edited request is not valid HTTP: \(error); nothing was sent")
        }
        guard case let .request(method, target, _) = message.start else {
            throw CLIError(description: "the edited text is not a request; nothing was sent")
        }
        // Framing is recomputed from the body as edited.
        let framing: Set<String> = ["content-length", "transfer-encoding"]
        return Request(
            method: method, url: try checked(target, flag: "the request line"),
            headers: message.headers.filter { !framing.contains($0.name.lowercased()) }.map { ($0.name, $0.value) },
            body: Data(message.body))
    }

    /// An absolute http(s) URL, or an error naming where it came from.
    static func checked(_ url: String, flag: String) throws -> String {
        guard OutgoingRequest.isAbsoluteHTTP(url) else {
            throw CLIError(description: "\(flag) \(url): give an absolute http:// or https:// URL")
        }
        return url
    }
}
