import BusymateShared
import Foundation

/// `busymate pair`, `unpair`, and what the readiness card and STATUS= say
/// of the pairing.
extension SupervisorService {
    var pairing: Pairing { Pairing(paths: paths, callExecutable: launcher.executable, identity: launcher.identity) }

    func pair(_ request: PairingRequest) async -> ControlMessage {
        let reply = await pairing.pair(request)
        paired = pairing.record()
        Systemd.status(pill())
        return reply
    }

    func unpair() async -> ControlMessage {
        let reply = await pairing.unpair()
        paired = pairing.record()
        Systemd.status(pill())
        return reply
    }

    /// The tunnel this supervisor runs now (not one draining, not a stranger).
    func isCurrentTunnel(_ pid: Int32) -> Bool { current?.pid == pid && current?.attached == true }

    /// At start: the private copy, and its mirror written again if it is gone.
    func loadPairing() {
        paired = pairing.record()
        pairing.restoreMirror()
    }

    func cloudReport(_ tunnelStatus: TunnelStatus?) -> CloudReport {
        CloudReport.make(paired, sinks: tunnelStatus?.cloud ?? [])
    }
}
