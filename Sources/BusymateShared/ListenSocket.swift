import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A bound, listening TCP socket as a bare descriptor, so that it can be
/// inherited by or passed to the tunnel and outlive any one tunnel.
public struct ListenSocket: Sendable {
    public let name: String
    public let descriptor: Int32
    public let bound: String

    public init(name: String, descriptor: Int32, bound: String) {
        self.name = name
        self.descriptor = descriptor
        self.bound = bound
    }

    public static func bind(_ address: ListenAddress, backlog: Int32 = 4096) throws -> ListenSocket {
        try bind(address, name: address.description, datagram: false, backlog: backlog)
    }

    /// A listener for `wanted`: TCP, or UDP for a datagram role.
    public static func bind(_ wanted: WantedListener) throws -> ListenSocket {
        try bind(wanted.address, name: wanted.name, datagram: wanted.role.isDatagram, backlog: 4096)
    }

    static func bind(_ address: ListenAddress, name: String, datagram: Bool, backlog: Int32) throws -> ListenSocket {
        let v6 = IPAddressText.isIPv6(address.host)
        let type = datagram ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue)
        let fd = socket(v6 ? AF_INET6 : AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if v6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let rc: Int32
        if v6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = in_port_t(UInt16(address.port).bigEndian)
            inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            rc = withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = in_port_t(UInt16(address.port).bigEndian)
            inet_pton(AF_INET, address.host, &sa.sin_addr)
            rc = withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard rc == 0 else {
            let e = SystemError("bind \(address)")
            close(fd)
            throw e
        }
        guard datagram || listen(fd, backlog) == 0 else {
            let e = SystemError("listen \(address)")
            close(fd)
            throw e
        }
        return ListenSocket(name: name, descriptor: fd, bound: localAddress(fd) ?? address.description)
    }

    /// `getsockname` as `host:port`.
    public static func localAddress(_ fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0 else { return nil }
        var host = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var addr = sin.pointee.sin_addr
                    inet_ntop(AF_INET, &addr, &host, socklen_t(host.count))
                    return "\(text(host)):\(UInt16(bigEndian: sin.pointee.sin_port))"
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                    var addr = sin.pointee.sin6_addr
                    inet_ntop(AF_INET6, &addr, &host, socklen_t(host.count))
                    return "[\(text(host))]:\(UInt16(bigEndian: sin.pointee.sin6_port))"
                }
            }
        default:
            return nil
        }
    }

    private static func text(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The socket's identity (sockfs inode), the same in every process that
    /// holds a descriptor to it.
    public static func identity(_ fd: Int32) -> UInt64? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }
}

/// The `LISTEN_FDS` convention: descriptors 3… with names in
/// `BUSYMATE_LISTEN_NAMES` (comma-separated; systemd's colon separator
/// clashes with `host:port`).
public enum InheritedListeners {
    public static let namesKey = "BUSYMATE_LISTEN_NAMES"

    public static func take(environment: [String: String] = ProcessInfo.processInfo.environment) -> [ListenSocket] {
        guard let countText = environment["LISTEN_FDS"], let count = Int(countText), count > 0 else { return [] }
        if let pid = environment["LISTEN_PID"], pid != "\(getpid())" { return [] }
        let names = (environment[namesKey] ?? "").split(separator: ",").map(String.init)
        return (0..<count).map { i in
            let fd = Int32(3 + i)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return ListenSocket(name: i < names.count ? names[i] : "fd\(fd)", descriptor: fd, bound: ListenSocket.localAddress(fd) ?? "?")
        }
    }
}
