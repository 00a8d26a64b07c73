import ArgumentParser
import BusymateShared
import Foundation

extension Tunnel {
    /// The package's upgrade, in the postinst: arm, `systemctl restart
    /// busymate`, then `--finish` (or `--cancel` when the restart did not
    /// happen). Root only: the supervisor checks the caller's uid.
    struct Handover: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Arm a handover (root): the supervisor's next stop, within 30 s, leaves the tunnel and the web front serving for the next supervisor to adopt.",
            discussion: """
                With --finish, after the restart: waits until a supervisor other than --from-pid has adopted them, then replaces \
                each adopted one with the binary now installed (the listening sockets stay open). With --cancel: disarms.
                """,
            shouldDisplay: false)
        @OptionGroup var options: GroupOption
        @Flag(help: "Disarm a handover (the restart it was armed for did not happen).")
        var cancel = false
        @Flag(help: "After the restart: replace the adopted tunnel and web front with the installed binaries.")
        var finish = false
        @Option(name: .customLong("from-pid"), help: "The supervisor that was stopped (--finish waits for another).")
        var fromPid: Int32?
        @Option(help: "How long --finish waits for the adoption, in seconds.")
        var wait: Double = 20

        func run() async throws {
            if cancel {
                print(try ControlClient.request(ControlMessage(.handover, message: "cancel"), paths: options.paths).message ?? "ok")
            } else if finish {
                try await finishHandover()
            } else {
                print(try ControlClient.request(ControlMessage(.handover), paths: options.paths).message ?? "ok")
            }
        }

        /// The new supervisor's report once it has adopted the tunnel (and,
        /// a few seconds more at most, the web front), or nil at the deadline.
        private func adopted() async throws -> StatusReport? {
            let deadline = Date().addingTimeInterval(wait)
            var tunnelSince: Date?
            while Date() < deadline {
                let report = try? ControlClient.request(ControlMessage(.status), paths: options.paths, timeout: 2).report
                if let report, report.supervisor.running, report.supervisor.pid != fromPid, report.tunnel.adopted {
                    // The web front reconnects on its own schedule; a new one (not adopted) is already the new binary.
                    if report.web?.adopted == true || report.web == nil { return report }
                    if let since = tunnelSince, Date().timeIntervalSince(since) > 5 { return report }
                    tunnelSince = tunnelSince ?? Date()
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            return nil
        }

        private func finishHandover() async throws {
            guard let report = try await adopted() else {
                throw CLIError(description: "no new supervisor adopted the tunnel within \(Int(wait)) s; restart the service instead")
            }
            print(try ControlClient.request(ControlMessage(.tunnelRestart), paths: options.paths).message ?? "tunnel restarting")
            if report.web?.adopted == true {
                print(try ControlClient.request(ControlMessage(.webRestart), paths: options.paths).message ?? "web front restarting")
            } else {
                print("the web front was not adopted within 5 s of the tunnel; if it still runs the old binary: busymate web restart")
            }
        }
    }
}
