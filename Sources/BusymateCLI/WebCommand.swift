import ArgumentParser
import BusymateShared
import Foundation

struct Web: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The web page: print its URL, or start, stop or restart busymate-web (the supervisor keeps running).",
        subcommands: [URLCommand.self, Start.self, Stop.self, Restart.self])

    struct URLCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url",
            abstract: "Print the page's address with its token (open it once: the page keeps a cookie).")
        @OptionGroup var options: GroupOption

        func run() async throws {
            let paths = options.paths
            guard FileManager.default.isReadableFile(atPath: paths.webToken.path) || !FileManager.default.fileExists(atPath: paths.webToken.path) else {
                throw CLIError(description: "permission denied on \(paths.webToken.path): run as root or as a member of group busymate")
            }
            guard let token = WebToken.read(paths) else {
                throw CLIError(description: "no web token at \(paths.webToken.path) yet (busymate-app writes it when it starts)")
            }
            let report = try? ControlClient.request(ControlMessage(.status), paths: paths).report
            let configured = (SettingsFile.read(paths.settings).settings ?? AppSettings()).webListen.description
            let address = report?.web?.bound ?? configured
            print("\(Self.base(address))/login?token=\(token)")
            if let web = report?.web, web.state != .ready {
                FileHandle.standardError.write(Data("busymate: the web front is \(web.state.rawValue)\(web.error.map { ": \($0)" } ?? "")\n".utf8))
            }
        }

        /// `http://host:port`; a wildcard address is reached on loopback here.
        static func base(_ bound: String) -> String {
            guard let address = ListenAddress(bound) else { return "http://\(bound)" }
            var host = address.host
            if host == "0.0.0.0" { host = "127.0.0.1" }
            if host == "::" { host = "::1" }
            return "http://\(host.contains(":") ? "[\(host)]" : host):\(address.port)"
        }
    }

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start the web front (and open its port).")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.webStart), paths: options.paths).message ?? "ok") }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the web front and close its port; capture goes on.")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.webStop), paths: options.paths).message ?? "ok") }
    }

    struct Restart: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Replace the web front process; its port stays open.")
        @OptionGroup var options: GroupOption
        func run() async throws { print(try ControlClient.request(ControlMessage(.webRestart), paths: options.paths).message ?? "ok") }
    }
}
