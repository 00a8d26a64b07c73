import BusymateShared
import CLinux
import Foundation

/// Spawns `busymate-tunnel` with the listening sockets as descriptors 3…
/// (`LISTEN_FDS`) and reports how each child ended.
struct TunnelLauncher: Sendable {
    let executable: String
    let paths: GroupPaths
    let identity: TunnelIdentity

    struct Exit: Sendable {
        var pid: Int32
        var description: String
        var clean: Bool
        /// The exit status, when it exited rather than being killed.
        var status: Int32?
    }

    func spawn(listeners: [ListenSocket], onExit: @escaping @Sendable (Exit) -> Void) throws -> Int32 {
        var environment = ProcessInfo.processInfo.environment
        for key in Systemd.unitOnlyEnvironment { environment[key] = nil }
        environment["LISTEN_FDS"] = "\(listeners.count)"
        environment[InheritedListeners.namesKey] = listeners.map(\.name).joined(separator: ",")
        environment["BUSYMATE_SUPERVISED"] = "1"
        environment[GroupPaths.environmentKey] = paths.root.path
        let argv = [executable, "--group", paths.root.path] + identity.arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        let pid = withCStrings(argv) { cArgv in
            withCStrings(envp) { cEnv in
                listeners.map(\.descriptor).withUnsafeBufferPointer { fds in
                    busymate_spawn(executable, cArgv, cEnv, fds.baseAddress, Int32(fds.count))
                }
            }
        }
        guard pid > 0 else { throw SystemError("spawn \(executable)", errno: -pid) }
        let waiter = Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            onExit(Self.describe(pid: pid, status: status))
        }
        waiter.name = "busymate-wait-\(pid)"
        waiter.start()
        return pid
    }

    static func describe(pid: Int32, status: Int32) -> Exit {
        let signal = status & 0x7f
        if signal == 0 {
            let code = (status >> 8) & 0xff
            return Exit(pid: pid, description: "exited with status \(code)", clean: code == 0, status: code)
        }
        let name = String(cString: strsignal(signal))
        return Exit(pid: pid, description: "killed by signal \(signal) (\(name))", clean: false)
    }

    /// A NULL-terminated C string array, as `argv` and `envp` want.
    private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        let pointers = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: strings.count + 1)
        defer {
            for i in 0..<strings.count { free(pointers[i]) }
            pointers.deallocate()
        }
        for (i, s) in strings.enumerated() { pointers[i] = strdup(s) }
        pointers[strings.count] = nil
        return body(pointers)
    }
}
