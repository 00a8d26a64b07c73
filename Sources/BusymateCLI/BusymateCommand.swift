import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

@available(macOS 10.15, *)
public struct BusymateCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "busymate",
        abstract: "Read and steer Busymate, the network debugger appliance.",
        version: BusymateVersion.full,
        subcommands: [
            Status.self, List.self, Show.self, Tail.self, Mark.self, Comment.self, Export.self, Curl.self, Resend.self, Compose.self,
            SSLProxying.self, Rules.self, Breakpoints.self,
            Pinned.self, CA.self, Tunnel.self, Web.self, Mode.self, Devices.self, Allow.self, DNS.self,
            Pair.self, Unpair.self, Cloud.self, WS.self,
        ])

    public init() {}

    /// ArgumentParser's main, but a store error reads as what it means
    /// ("the capture store is corrupt"), not as "SQLite error 11".
    public static func main() async {
        do {
            var command = try parseAsRoot(groupFirst(Array(CommandLine.arguments.dropFirst())))
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(
                with: StoreHealth.isStoreError(error)
                    ? CLIError(description: StoreHealth.describe(error) + StoreHealth.advice(error)) : error)
        }
    }

    /// ArgumentParser's exit, but every error starts `busymate:` as the
    /// CLI's own do (it writes "Error:" for a usage error).
    static func exit(with error: Error) -> Never {
        let code = exitCode(for: error)
        var message = fullMessage(for: error)
        if code == .success {
            if !message.isEmpty { print(message) }
            Foundation.exit(code.rawValue)
        }
        // `status` ends with its exit code alone: nothing to say.
        guard !message.isEmpty else { Foundation.exit(code.rawValue) }
        if message.hasPrefix("Error: ") { message = String(message.dropFirst("Error: ".count)) }
        if !message.hasPrefix("busymate: ") { message = "busymate: " + message }
        FileHandle.standardError.write(Data((message + "\n").utf8))
        Foundation.exit(code.rawValue)
    }
}

extension BusymateCommand {
    /// `busymate --group DIR list`: the group is each subcommand's option;
    /// given before the subcommand, it is moved after it (before a `--`).
    static func groupFirst(_ arguments: [String]) -> [String] {
        var rest = arguments[...]
        var group: [String] = []
        while let first = rest.first {
            if first == "--group", rest.count >= 2 {
                group += rest.prefix(2)
                rest = rest.dropFirst(2)
            } else if first.hasPrefix("--group=") {
                group.append(first)
                rest = rest.dropFirst()
            } else {
                break
            }
        }
        guard !group.isEmpty else { return arguments }
        var moved = Array(rest)
        moved.insert(contentsOf: group, at: moved.firstIndex(of: "--") ?? moved.endIndex)
        return moved
    }
}

struct GroupOption: ParsableArguments {
    @Option(name: .long, help: "The group directory (default: $BUSYMATE_GROUP, /var/lib/busymate/group, ./shared-group).")
    var group: String?

    var paths: GroupPaths { GroupPaths.resolve(explicit: group) }

    /// Where the group came from, and how to name another: for a user whose
    /// supervisor runs with a group this command did not pick.
    var hint: String {
        let chosen: String
        if let group, !group.isEmpty {
            chosen = "--group"
        } else if let env = ProcessInfo.processInfo.environment[GroupPaths.environmentKey], !env.isEmpty {
            chosen = "$\(GroupPaths.environmentKey)"
        } else if paths.root.path == GroupPaths.installedRoot {
            chosen = "the installed default"
        } else {
            chosen = "no --group, no $\(GroupPaths.environmentKey), no \(GroupPaths.installedRoot): ./shared-group here"
        }
        return "the group is \(paths.root.path) (\(chosen)); if Busymate runs with another, name it: "
            + "--group DIR, or export \(GroupPaths.environmentKey)=DIR"
    }
}

/// Errors the CLI prints as one line on stderr.
struct CLIError: Error, CustomStringConvertible {
    var description: String
}

enum ControlClient {
    /// One request, one reply, over `control.sock`.
    static func request(_ message: ControlMessage, paths: GroupPaths, timeout: Double = 15) throws -> ControlMessage {
        let socket: UnixSocket
        do {
            socket = try UnixSocket.connect(path: paths.controlSocket.path)
        } catch let error as SystemError where error.errno == EACCES {
            throw CLIError(description: "permission denied on \(paths.controlSocket.path): run as root or as a member of group busymate")
        } catch {
            throw CLIError(description: "the supervisor is not running (\(paths.controlSocket.path): \(error))")
        }
        defer { socket.close() }
        socket.setReceiveTimeout(seconds: timeout)
        try socket.send(message)
        guard let (reply, fds) = try socket.receive() else { throw CLIError(description: "the supervisor closed the connection") }
        fds.forEach { close($0) }
        if reply.ok == false { throw CLIError(description: reply.message ?? "the supervisor refused") }
        return reply
    }
}
