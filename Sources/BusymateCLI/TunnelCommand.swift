import ArgumentParser
import BusymateShared

struct Tunnel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start, stop or restart the tunnel (the supervisor keeps running).",
        subcommands: [Start.self, Stop.self, Restart.self, Handover.self])

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start capturing (the VPN toggle on).")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.tunnelStart), paths: options.paths).message ?? "ok") }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop capturing and close the proxy port (the VPN toggle off).")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.tunnelStop), paths: options.paths).message ?? "ok") }
    }

    struct Restart: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Replace the tunnel process; the listening sockets stay open.")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.tunnelRestart), paths: options.paths).message ?? "ok") }
    }
}
