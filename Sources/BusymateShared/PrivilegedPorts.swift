import Foundation

/// Ports below 1024 need root's own say-so. settings.json is writable by
/// group busymate, and the supervisor binds as root what it names: a group
/// member could otherwise put a proxy or a page on port 80, 443 or 53. The
/// supervisor's command line (`--privileged-port N`), which only root
/// writes, lists the ones allowed.
public struct PrivilegedPorts: Sendable, Equatable {
    public var allowed: Set<Int>

    public init(_ allowed: Set<Int> = []) { self.allowed = allowed }

    public struct Refused: Error, CustomStringConvertible, Sendable {
        public var port: Int
        public var description: String {
            "port \(port) is below 1024 and settings.json (writable by group busymate) cannot open a privileged port; "
                + "start busymate-app with --privileged-port \(port) to allow it"
        }
    }

    /// Throws for a port from 1 to 1023 not allowed (0 asks the kernel for any).
    public func check(_ address: ListenAddress) throws(Refused) {
        guard address.port > 0, address.port < 1024, !allowed.contains(address.port) else { return }
        throw Refused(port: address.port)
    }
}
