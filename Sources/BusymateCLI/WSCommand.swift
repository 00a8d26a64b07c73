import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// `busymate ws`: WebSockets the proxy reads.
struct WS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "Act on open WebSockets (their messages: busymate show ID --messages).",
        subcommands: [Send.self])

    /// mitmproxy's `inject.websocket`: a message of your own into an open socket.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a message into an open WebSocket, to its client or its server.",
            discussion: """
                The message goes after the message under way in that direction, uncompressed, as one frame; the socket's \
                messages show it as injected. Waits for the tunnel that carries the socket (up to 10 s) and prints the message's number.
                """)

        enum Side: String, ExpressibleByArgument, CaseIterable { case client, server }
        enum Kind: String, ExpressibleByArgument, CaseIterable { case text, binary }

        @OptionGroup var options: GroupOption
        @Argument(
            help: "The socket's exchange id (its handshake's row), a request id, or the start of one.", completion: Completions.exchangeIDs)
        var id: String
        @Option(help: "Where the message goes: client or server.") var to: Side
        @Option(help: "The message's text.") var text: String?
        @Option(help: "A file whose bytes are the message (- for standard input).", completion: .file()) var file: String?
        @Option(help: "text or binary (default: text for --text, binary for --file).") var type: Kind?

        func validate() throws {
            if (text == nil) == (file == nil) { throw ValidationError("give the message with --text TEXT or --file FILE") }
            if text != nil, type == .binary { throw ValidationError("--text sends text; for binary bytes use --file") }
        }

        func run() async throws {
            let payload: Data
            if let text {
                payload = Data(text.utf8)
            } else if file == "-" {
                payload = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                do {
                    payload = try Data(contentsOf: URL(fileURLWithPath: file ?? ""))
                } catch {
                    throw CLIError(description: "cannot read \(file ?? ""): \(error.localizedDescription)")
                }
            }
            let opcode: WebSocketMessageRecord.Opcode = (type ?? (text != nil ? .text : .binary)) == .text ? .text : .binary
            if opcode == .text, String(validating: payload, as: UTF8.self) == nil {
                throw CLIError(description: "a text message must be UTF-8; send these bytes with --type binary")
            }
            let database = try StoreAccess.open(options.paths, readOnly: false)
            let record = try StoreAccess.exchange(id, in: TrafficRepository(database: database))
            guard let exchangeID = record.id else { throw CLIError(description: "exchange \(id) has no id") }
            let sends = WebSocketSendRepository(database: database)
            do {
                let seq = try sends.send(
                    exchangeID: exchangeID, toClient: to == .client, opcode: opcode, payload: payload, paths: options.paths, sender: "cli")
                print(
                    "sent message #\(seq) (\(payload.count) bytes, \(opcode == .text ? "text" : "binary")) to the \(to.rawValue) of exchange \(exchangeID)"
                )
            } catch let refusal as WebSocketSendRepository.Refusal {
                throw CLIError(description: refusal.description)
            }
        }
    }
}
