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
            abstract:
                "Print the page's address with its token (open it once: the page keeps a cookie); --exchange or --device links to one.")
        @OptionGroup var options: GroupOption
        @Option(help: "Link to this exchange (its detail opens).") var exchange: Int64?
        @Option(help: "Link to this device (the Devices view, its row marked).") var device: String?

        func run() async throws {
            let paths = options.paths
            guard
                FileManager.default.isReadableFile(atPath: paths.webToken.path)
                    || !FileManager.default.fileExists(atPath: paths.webToken.path)
            else {
                throw CLIError(description: "permission denied on \(paths.webToken.path): run as root or as a member of group busymate")
            }
            guard let token = WebToken.read(paths) else {
                throw CLIError(description: "no web token at \(paths.webToken.path) yet (busymate-app writes it when it starts)")
            }
            let report = try? ControlClient.request(ControlMessage(.status), paths: paths).report
            let configured = (SettingsFile.read(paths.settings).settings ?? AppSettings()).webListen.description
            let address = report?.web?.bound ?? configured
            if let device, !AppSettings.NamedDevice.isValidName(device) && !IPAddressText.isLiteral(device) {
                throw ValidationError("\"\(device)\" is not a device name or an address")
            }
            print("\(Self.base(address))/login?token=\(token)\(Self.fragment(exchange: exchange, device: device))")
            if let web = report?.web, web.state != .ready {
                FileHandle.standardError.write(
                    Data("busymate: the web front is \(web.state.rawValue)\(web.error.map { ": \($0)" } ?? "")\n".utf8))
            }
        }

        /// The page's deep link: `#/exchange/ID` or `#/device/NAME` (a
        /// redirect keeps it; the login replays it).
        static func fragment(exchange: Int64?, device: String?) -> String {
            if let exchange { return "#/exchange/\(exchange)" }
            if let device { return "#/device/\(device)" }
            return ""
        }

        /// The page's address, as the supervisor says it is bound.
        static func pageBase(_ paths: GroupPaths) -> String {
            let report = try? ControlClient.request(ControlMessage(.status), paths: paths).report
            let configured = (SettingsFile.read(paths.settings).settings ?? AppSettings()).webListen.description
            return base(report?.web?.bound ?? configured)
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
