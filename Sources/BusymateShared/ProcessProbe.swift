import CLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What `/proc` says about a process.
public enum ProcessProbe {
    /// The CPUs this process may use: its affinity (taskset, systemd's
    /// CPUAffinity=), not the machine's count. One event loop per CPU.
    public static var usableCPUs: Int { Int(busymate_usable_cpus()) }

    public static func isAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        if kill(pid, 0) == 0 { return true }
        return errno == EPERM
    }

    /// The short command name (`/proc/<pid>/comm`, 15 characters at most).
    public static func commandName(_ pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The arguments the process was started with.
    public static func arguments(_ pid: Int32) -> [String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return [] }
        return data.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `pid` is a live busymate-tunnel serving the group at `groupPath`.
    public static func isTunnel(_ pid: Int32, servingGroup groupPath: String) -> Bool {
        isChild(pid, named: "busymate-tunnel", servingGroup: groupPath)
    }

    /// Whether `pid` is a live `name` (busymate-tunnel, busymate-web) started with `--group groupPath`.
    public static func isChild(_ pid: Int32, named name: String, servingGroup groupPath: String) -> Bool {
        guard isAlive(pid), !isZombieOrGone(pid), commandName(pid) == name else { return false }
        let args = arguments(pid)
        guard let flag = args.firstIndex(of: "--group"), flag + 1 < args.count else { return false }
        return URL(fileURLWithPath: args[flag + 1]).standardizedFileURL.path == groupPath
    }

    /// A live `name` started with `--group groupPath`, found by walking `/proc`.
    public static func find(named name: String, servingGroup groupPath: String) -> Int32? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        let own = getpid()
        return entries.lazy.compactMap { Int32($0) }.first { $0 != own && isChild($0, named: name, servingGroup: groupPath) }
    }

    /// Lines of `/proc/<pid>/status` as a dictionary (`Uid`, `CapEff`, `NoNewPrivs`, …).
    public static func status(_ pid: Int32) -> [String: String] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return [:] }
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            out[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return out
    }

    /// Whether the process is a zombie or gone.
    public static func isZombieOrGone(_ pid: Int32) -> Bool {
        guard let state = status(pid)["State"] else { return true }
        return state.hasPrefix("Z") || state.hasPrefix("X")
    }
}
