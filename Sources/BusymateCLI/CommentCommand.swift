import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Comment: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep a comment with exchanges (mitmproxy's comments); an empty one removes it.",
        discussion: "Shown by `show` and on the page, exported in HAR (an entry's `comment`) and found with `~comment REGEX`.")

    @OptionGroup var options: GroupOption
    @Argument(help: "An exchange id, request id, or the start of a request id.", completion: Completions.exchangeIDs) var id: String
    @Argument(help: "The comment ('' removes it).") var text: String
    @Flag(help: "Print the exchange's id, marker and comment as JSON.") var json = false

    func run() async throws {
        try Annotate.apply(.init(comment: .some(text)), to: [id], paths: options.paths, json: json) { record in
            record.comment == nil ? "removed the comment of \(record.id ?? 0)" : "commented \(record.id ?? 0)"
        }
    }
}
