import ArgumentParser
import BusymateShared

struct Pair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pair this appliance with an account, so captures stream to its cloud (root).",
        discussion: """
            CODE is the pairing code the dashboard shows. --api and --anon-key are the account's API (https://PROJECT.supabase.co) \
            and its anon key; the supervisor keeps both (root only, never in settings.json), so a later re-pairing needs the code \
            alone. The supervisor claims the device token, keeps its private copy and mirrors it to the tunnel, whose cloud sink \
            then sends every exchange captured from now on (the store is its outbox: nothing is lost while offline).
            """)

    @OptionGroup var options: GroupOption
    @Argument(help: "The pairing code.") var code: String
    @Option(name: .long, help: "The account's API URL (https; http only to this machine).") var api: String?
    @Option(name: .customLong("anon-key"), help: "The API's anon key.") var anonKey: String?
    @Option(name: .long, help: "This appliance's name on the dashboard (default: the host name).") var name: String?

    func run() async throws {
        let reply = try ControlClient.request(
            .pair(PairingRequest(code: code, api: api, anonKey: anonKey, name: name)), paths: options.paths, timeout: 60)
        print(reply.message ?? "paired")
    }
}

struct Unpair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unpair: tell the server, and remove the device token and its mirror (root).",
        discussion: "Captures stay in the local store. The API and anon key are kept for a later `busymate pair CODE`.")

    @OptionGroup var options: GroupOption

    func run() async throws {
        print(try ControlClient.request(ControlMessage(.unpair), paths: options.paths, timeout: 60).message ?? "unpaired")
    }
}
