import ArgumentParser
import BusymateShared
import Foundation

extension SSLProxying {
    /// `ssl_proxying.upstream_trust`: an origin's own CA (a staging
    /// server's, a company's), trusted beside the system store when
    /// Busymate verifies the upstream certificate of an intercepted host.
    struct TrustUpstream: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "trust-upstream",
            abstract: "Trust a CA bundle (PEM) for upstream certificates, beside the system store; --remove forgets it.",
            discussion: "Written to settings.json's ssl_proxying.upstream_trust as an absolute path (the tunnel reads it), applied live.")
        @OptionGroup var options: GroupOption
        @Argument(help: "A PEM file of CA certificates (a relative path is taken from the current directory).") var file: String?
        @Flag(help: "Trust the system store alone again.") var remove = false

        func validate() throws {
            if remove == (file != nil) { throw ValidationError("give a PEM file, or --remove") }
        }

        func run() async throws {
            var path: String?
            if let file {
                let absolute = URL(fileURLWithPath: file).standardizedFileURL.path
                guard let text = try? String(contentsOfFile: absolute, encoding: .utf8) else {
                    throw CLIError(description: "\(file): cannot read it (a PEM file of CA certificates)")
                }
                guard text.contains("-----BEGIN CERTIFICATE-----") else { throw CLIError(description: "\(file): no PEM certificate in it") }
                path = absolute
            }
            try SettingsEdit.apply(options.paths) { root in
                var ssl = root["ssl_proxying"] ?? JSONNode(.object([]))
                if case .object = ssl.value {} else { ssl = JSONNode(.object([])) }
                ssl.set("upstream_trust", path.map { JSONNode(.string($0)) } ?? JSONNode(.null))
                root.set("ssl_proxying", ssl)
            }
            print(
                path.map { "upstream certificates are verified against the system store and \($0)" }
                    ?? "upstream certificates are verified against the system store alone")
        }
    }
}
