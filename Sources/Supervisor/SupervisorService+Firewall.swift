import BusymateShared
import Foundation
import Logging

/// Transparent mode's rules follow the tunnel: on while the mode is
/// transparent and a tunnel serves, off otherwise (traffic then goes
/// direct rather than into a port nobody accepts on), and a stale table
/// from a crashed supervisor is replaced or removed at start. The table is
/// this appliance's own (`Firewall.table(for:)`): another's is never touched.
extension SupervisorService {
    var firewallWanted: Bool {
        guard settings.mode == .transparent, desired == .running, !shuttingDown, let tunnel = current else { return false }
        // Redirecting to a port that is not ours (it failed to bind) would
        // send the traffic to whoever holds it, or nowhere.
        let bound = Set(listeners.map(\.name))
        guard settings.wantedListeners.filter(\.role.isRedirectTarget).allSatisfy({ bound.contains($0.name) }) else { return false }
        // A replacement in standby: the old tunnel still serves.
        return tunnel.state == .ready || (tunnel.state == .starting && !draining.isEmpty)
    }

    /// Whom the output rules leave alone: the tunnel's uid (the web front,
    /// another uid, reaches origins only through the proxy: resends).
    var childrenUID: UInt32 {
        guard getuid() == 0, let entry = getpwnam(launcher.identity.user) else { return getuid() }
        return entry.pointee.pw_uid
    }

    func reconcileFirewall() {
        // The next supervisor adopts the tunnel and the table with it.
        if handingOver { return }
        if firewallWanted {
            let script = Firewall.script(settings, tunnelUID: childrenUID, table: firewall.table)
            guard script != firewall.installed else { return }
            foldQuicCount()
            do {
                try Firewall.install(script)
                firewall.installed = script
                firewall.stale = false
                firewall.error = nil
                networkLogger.notice(
                    "transparent mode: nftables rules installed (table inet \(firewall.table))",
                    metadata: ["PORTS": "\(settings.transparent.ports)", "INTERFACES": "\(settings.transparent.interfaces)"])
                notifier?.post(.modeDidChange, payload: "transparent")
            } catch {
                firewall.installed = nil
                if firewall.error != error.description {
                    networkLogger.error("cannot install the transparent rules", metadata: ["ERROR": "\(error)"])
                }
                firewall.error = error.description
            }
        } else if firewall.installed != nil || firewall.stale {
            foldQuicCount()
            do {
                try Firewall.remove(table: firewall.table)
                if firewall.installed != nil {
                    networkLogger.notice("transparent rules removed", metadata: ["WHY": "\(firewallOffReason)"])
                    notifier?.post(.modeDidChange, payload: settings.mode.rawValue)
                }
                firewall.installed = nil
                firewall.stale = false
                firewall.error = nil
            } catch {
                if firewall.installed == nil, Firewall.couldNotHaveInstalled(error) {
                    // Only the look for a stale table failed, where none can be
                    // (no nft, or not root: a developer's `make run`).
                    firewall.stale = false
                    networkLogger.debug("no stale transparent table to look for", metadata: ["WHY": "\(error)"])
                    return
                }
                if firewall.error != error.description {
                    networkLogger.error("cannot remove the transparent rules", metadata: ["ERROR": "\(error)"])
                }
                firewall.error = error.description
            }
        }
    }

    var firewallOffReason: String {
        if shuttingDown { return "stopping" }
        if settings.mode != .transparent { return "mode is \(settings.mode.rawValue)" }
        if desired == .stopped { return "the tunnel was stopped" }
        if let failed = listenerErrors.first(where: { ListenerRole.parse($0.key)?.role.isRedirectTarget == true }) {
            return "cannot listen on \(failed.key): \(failed.value)"
        }
        return "no tunnel is serving"
    }

    /// The QUIC counter restarts with each table: add what it had.
    func foldQuicCount() {
        guard firewall.installed != nil, let packets = Firewall.quicPackets(table: firewall.table) else { return }
        firewall.quicBase += packets
        firewall.quicLast = 0
    }

    /// Whether the table we installed is still there, read with the QUIC
    /// counter at most every `interval` (each is an `nft` run): when status
    /// is asked (1 s) and on the health tick (5 s). Someone else may have
    /// removed it (`nft flush ruleset`, a firewall service's reload): that
    /// is said, and it is installed again.
    func verifyFirewall(every interval: TimeInterval) {
        guard firewall.installed != nil, Date().timeIntervalSince(firewall.checkedAt) >= interval else { return }
        firewall.checkedAt = Date()
        if let packets = Firewall.quicPackets(table: firewall.table) {
            firewall.quicLast = packets
            return
        }
        guard !Firewall.isInstalled(table: firewall.table) else { return }
        networkLogger.error("the transparent rules were removed from outside (table inet \(firewall.table) is gone); installing them again")
        firewall.quicBase += firewall.quicLast
        firewall.quicLast = 0
        firewall.installed = nil
        reconcileFirewall()
    }

    var quicRejected: Int { firewall.quicBase + firewall.quicLast }

    var rulesState: String {
        if let error = firewall.error { return "error: \(error)" }
        return firewall.installed != nil ? "installed" : "off"
    }
}

/// What the supervisor knows of its nftables table.
struct FirewallState {
    /// Its name, this appliance's own.
    let table: String
    /// The script in force (nil: none of ours).
    var installed: String?
    /// A table may be left from before this supervisor (removed unless wanted).
    var stale = true
    var error: String?
    var quicBase = 0
    var quicLast = 0
    var checkedAt = Date.distantPast

    init(table: String) { self.table = table }
}
