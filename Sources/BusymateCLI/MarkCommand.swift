import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Mark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark exchanges (mitmproxy's marks), or remove their marks.",
        discussion: """
            A mark is kept in the store with the exchange, shown in `list` (flag M) and on the page, exported in HAR \
            (`_marker`) and found with `~marked` or `~marker REGEX`. `--comment` sets a note at the same time \
            (`busymate comment` sets one alone).
            """)

    @OptionGroup var options: GroupOption
    @Argument(help: "Exchange ids (from `busymate list`), request ids, or the start of a request id.", completion: Completions.exchangeIDs)
    var ids: [String]
    @Option(name: .customLong("as"), help: "The marker: a word or an emoji (default: default).") var marker: String?
    @Option(help: "A comment to keep with each exchange; an empty one removes it.") var comment: String?
    @Flag(help: "Remove the mark instead.") var remove = false
    @Flag(help: "Print the exchanges' ids, markers and comments as JSON.") var json = false

    func validate() throws {
        if ids.isEmpty { throw ValidationError("give an exchange id (from `busymate list`) or a request id") }
        if remove && marker != nil { throw ValidationError("--remove and --as: give one") }
    }

    func run() async throws {
        let change = AnnotationRepository.Change(marker: .some(remove ? nil : (marker ?? "default")), comment: comment.map { .some($0) })
        try Annotate.apply(change, to: ids, paths: options.paths, json: json) { record in
            remove ? "unmarked \(record.id ?? 0)" : "marked \(record.id ?? 0) (\(record.marker ?? ""))"
        }
    }
}
