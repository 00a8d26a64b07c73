import CLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Drops root for good, in OpenSSH's privsep order: supplementary groups,
/// gid, uid, a check that root cannot be regained, then no-new-privs.
///
/// While still root, before the uid changes, it also empties the ambient
/// set and the capability bounding set (which needs CAP_SETPCAP), so that
/// neither the process nor anything it could execute can ever gain a
/// capability again. `/proc/<pid>/status` then shows `CapBnd`, `CapPrm`,
/// `CapEff`, `CapInh` and `CapAmb` all zero and `NoNewPrivs: 1`.
public enum PrivilegeDrop {
    public enum Outcome: Sendable, Equatable {
        case dropped(user: String, uid: UInt32, gid: UInt32)
        /// Started without root (a developer's machine): nothing to drop.
        case unprivileged(uid: UInt32)
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public static func drop(user: String, group: String) throws(Failure) -> Outcome {
        guard geteuid() == 0 else {
            _ = busymate_set_no_new_privs()
            return .unprivileged(uid: getuid())
        }
        guard let uid = lookupUser(user) else {
            throw Failure(
                description:
                    "user \"\(user)\" does not exist; create it with systemd-sysusers (units/busymate.sysusers) or `useradd --system \(user)`"
            )
        }
        guard let gid = lookupGroup(group) else {
            throw Failure(description: "group \"\(group)\" does not exist; create it with systemd-sysusers or `groupadd --system \(group)`")
        }
        guard uid != 0, gid != 0 else {
            throw Failure(
                description: "refusing to run the tunnel as root (--tunnel-user \"\(user)\" / --tunnel-group \"\(group)\" resolve to id 0)")
        }
        guard busymate_setgroups1(gid) == 0 else { throw failure("setgroups") }
        guard busymate_setresgid(gid, gid, gid) == 0 else { throw failure("setresgid") }
        try emptyBoundingSet()
        guard busymate_setresuid(uid, uid, uid) == 0 else { throw failure("setresuid") }
        // The old ids must be gone for good.
        guard setgid(0) != 0, setuid(0) != 0 else {
            throw Failure(description: "privileges could be regained after the drop; refusing to go on")
        }
        var r: uid_t = 0, e: uid_t = 0, s: uid_t = 0
        guard busymate_getresuid(&r, &e, &s) == 0, r == uid, e == uid, s == uid, getegid() == gid else {
            throw Failure(description: "ids after the drop are not \(uid):\(gid)")
        }
        // setresuid away from root already cleared the permitted and
        // effective sets; this also empties the inheritable one and checks.
        guard busymate_caps_clear_all() == 0 else { throw failure("clearing the capability sets (capset/capget)") }
        guard busymate_set_no_new_privs() == 0 else { throw failure("prctl(PR_SET_NO_NEW_PRIVS)") }
        return .dropped(user: user, uid: uid, gid: gid)
    }

    /// Empties the ambient set and the bounding set while still root, and
    /// refuses when it cannot. The bounding set needs CAP_SETPCAP to shrink:
    /// a root tunnel without it was started by a supervisor confined without
    /// it (a unit whose CapabilityBoundingSet= lacks it), and going on would
    /// leave a network-facing process whose bounding set quietly still holds
    /// what the supervisor had. That is a configuration error to show at
    /// once, in the journal and the supervisor's status, not to work around.
    private static func emptyBoundingSet() throws(Failure) {
        guard busymate_ambient_clear_all() == 0 else { throw failure("prctl(PR_CAP_AMBIENT_CLEAR_ALL)") }
        var cap: Int32 = -1
        guard busymate_capbset_drop_all(&cap) == 0 else {
            let reason = String(cString: strerror(errno))
            throw Failure(
                description:
                    "cannot empty the capability bounding set: prctl(PR_CAPBSET_DROP, \(cap)) failed: \(reason); the tunnel must start as root with CAP_SETPCAP (add it to the supervisor unit's CapabilityBoundingSet=); refusing to go on"
            )
        }
        let left = busymate_capbset_first()
        guard left < 0 else {
            throw Failure(description: "the capability bounding set still holds capability \(left) after the drop; refusing to go on")
        }
    }

    private static func failure(_ call: String) -> Failure {
        Failure(description: "\(call) failed: \(String(cString: strerror(errno)))")
    }

    public static func lookupUser(_ name: String) -> UInt32? {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwnam_r(name, &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return pwd.pw_uid
    }

    public static func lookupGroup(_ name: String) -> UInt32? {
        var grp = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 65536)
        guard getgrnam_r(name, &grp, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return grp.gr_gid
    }

    /// Whether `uid` is a member of group `gid`, by primary or supplementary membership.
    public static func user(_ uid: UInt32, isMemberOf gid: UInt32) -> Bool {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return false }
        if pwd.pw_gid == gid { return true }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(pwd.pw_name, pwd.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(pwd.pw_name, pwd.pw_gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(gid)
    }
}
