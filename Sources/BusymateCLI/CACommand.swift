import ArgumentParser
import BusymateShared
import Foundation

struct CA: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca", abstract: "The interception CA: where it is, a copy, and the system trust store.",
        subcommands: [Path.self, Export.self, Install.self, Uninstall.self])

    /// Debian's local trust anchors (update-ca-certificates reads them).
    static let systemCopy = "/usr/local/share/ca-certificates/busymate.crt"

    struct Path: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the CA certificate's path.")
        @OptionGroup var options: GroupOption
        func run() async throws { print(options.paths.caPEM.path) }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write the CA certificate (never the key), PEM by default.")
        @OptionGroup var options: GroupOption
        @Flag(help: "DER instead of PEM.") var der = false
        @Flag(help: "PEM (the default).") var pem = false
        @Option(name: .shortAndLong, help: "A file instead of standard output.") var output: String?
        func run() async throws {
            let source = der ? options.paths.caDER : options.paths.caPEM
            guard let data = FileManager.default.contents(atPath: source.path) else {
                throw CLIError(description: "no CA at \(source.path) (the supervisor creates it on first start)")
            }
            if let output {
                guard FileManager.default.createFile(atPath: output, contents: data) else {
                    throw CLIError(description: "cannot write \(output)")
                }
            } else {
                FileHandle.standardOutput.write(data)
            }
        }
    }

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Trust the CA system-wide (Debian: update-ca-certificates).")
        @OptionGroup var options: GroupOption
        func run() async throws {
            guard let data = FileManager.default.contents(atPath: options.paths.caPEM.path) else {
                throw CLIError(description: "no CA at \(options.paths.caPEM.path)")
            }
            do {
                try FileManager.default.createDirectory(
                    atPath: (CA.systemCopy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try AtomicFile.write(data, to: URL(fileURLWithPath: CA.systemCopy), mode: 0o644)
            } catch {
                throw CLIError(description: "cannot write \(CA.systemCopy): \(error) (run as root)")
            }
            try CA.updateTrustStore(fresh: false)
            print("installed \(CA.systemCopy); the system trust store now includes the Busymate CA")
        }
    }

    struct Uninstall: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop trusting the CA system-wide.")
        @OptionGroup var options: GroupOption
        func run() async throws {
            guard FileManager.default.fileExists(atPath: CA.systemCopy) else {
                throw CLIError(description: "the Busymate CA is not installed")
            }
            do {
                try FileManager.default.removeItem(atPath: CA.systemCopy)
            } catch {
                throw CLIError(description: "cannot remove \(CA.systemCopy): \(error) (run as root)")
            }
            try CA.updateTrustStore(fresh: true)
            print("removed the Busymate CA from the system trust store")
        }
    }

    static func updateTrustStore(fresh: Bool) throws {
        let tool = "/usr/sbin/update-ca-certificates"
        guard FileManager.default.isExecutableFile(atPath: tool) else {
            throw CLIError(description: "\(tool) is missing (apt-get install ca-certificates)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = fresh ? ["--fresh"] : []
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CLIError(description: "update-ca-certificates failed (\(process.terminationStatus))")
        }
    }
}
