import CLinux
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

public struct SystemError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var errno: Int32
    public init(_ operation: String, errno: Int32 = Glibc.errno) {
        self.operation = operation
        self.errno = errno
    }
    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}

public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

/// A blocking Unix-domain socket used for the control plane, where NIO has
/// no way to pass descriptors (`SCM_RIGHTS`). Frames are a 4-byte big-endian
/// length and a payload; descriptors ride on a frame's first byte.
public final class UnixSocket: @unchecked Sendable {
    public let fd: Int32
    private let writeLock = Mutex(())
    private let closed = Atomic<Bool>(false)
    public static let maxFrame = 1 << 20
    public static let maxDescriptors = 64

    public init(fd: Int32) { self.fd = fd }

    deinit { close() }

    public func close() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { Glibc.close(fd) }
    }

    /// Wakes a thread blocked in `receiveFrame` (it then sees end of file).
    public func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    static func address(_ path: String) throws -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count < capacity else {
            throw SystemError("socket path too long (\(bytes.count) bytes, at most \(capacity - 1)): \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        return (addr, socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1))
    }

    public static func connect(path: String, type: Int32 = Int32(SOCK_STREAM.rawValue)) throws -> UnixSocket {
        let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        let s = UnixSocket(fd: fd)
        let file = try SocketFile(path)
        defer { file.close() }
        var (addr, len) = try address(file.address)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) } }
        guard rc == 0 else { throw SystemError("connect \(path)") }
        return s
    }

    /// A socket file in the group directory, checked before anything is
    /// sent to it: group members can plant names there, and root must not
    /// follow one to another socket (`busymate_open_socket_file`). Its
    /// `address` reaches the inode that was checked, not whatever the path
    /// names by the time of the send.
    struct SocketFile {
        let descriptor: Int32
        let address: String

        init(_ path: String) throws {
            descriptor = busymate_open_socket_file(path)
            guard descriptor >= 0 else {
                let e = errno
                switch e {
                case ELOOP: throw SystemError("\(path) is a symbolic link; refusing to follow it", errno: e)
                case ENOTSOCK: throw SystemError("\(path) is not a socket", errno: e)
                case EMLINK: throw SystemError("\(path) is a socket linked in from elsewhere; refusing it", errno: e)
                default: throw SystemError("connect \(path)", errno: e)
                }
            }
            // Without /proc (a sandbox), the path checked a moment ago.
            address = access("/proc/self/fd", X_OK) == 0 ? "/proc/self/fd/\(descriptor)" : path
        }

        func close() { _ = Glibc.close(descriptor) }
    }

    /// Binds `path` (removing a stale socket file first) with `mode`.
    public static func bind(path: String, type: Int32, mode: mode_t) throws -> UnixSocket {
        let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        let s = UnixSocket(fd: fd)
        var (addr, len) = try address(path)
        unlink(path)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, len) } }
        guard rc == 0 else { throw SystemError("bind \(path)") }
        chmod(path, mode)
        if type == Int32(SOCK_STREAM.rawValue) {
            guard Glibc.listen(fd, 64) == 0 else { throw SystemError("listen \(path)") }
        }
        return s
    }

    public func accept() throws -> UnixSocket {
        while true {
            let client = busymate_accept_cloexec(fd)
            if client >= 0 { return UnixSocket(fd: client) }
            if errno == EINTR || errno == ECONNABORTED { continue }
            throw SystemError("accept")
        }
    }

    public func peerCredentials() -> PeerCredentials? {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard busymate_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    public func setReceiveTimeout(seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    // MARK: frames

    public func sendFrame(_ payload: [UInt8], descriptors: [Int32] = []) throws {
        guard payload.count <= Self.maxFrame, descriptors.count <= Self.maxDescriptors else {
            throw SystemError("frame too large", errno: EMSGSIZE)
        }
        var frame = withUnsafeBytes(of: UInt32(payload.count).bigEndian, Array.init)
        frame.append(contentsOf: payload)
        try writeLock.withLock { _ in
            var offset = 0
            var first = true
            while offset < frame.count {
                let n = try frame.withUnsafeBytes { raw -> Int in
                    try sendmsgOnce(raw, offset: offset, descriptors: first ? descriptors : [])
                }
                first = false
                offset += n
            }
        }
    }

    private func sendmsgOnce(_ raw: UnsafeRawBufferPointer, offset: Int, descriptors: [Int32]) throws -> Int {
        guard let base = raw.baseAddress else { return raw.count }
        var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: base.advanced(by: offset)), iov_len: raw.count - offset)
        var msg = msghdr()
        let controlLength = descriptors.isEmpty ? 0 : cmsgSpace(descriptors.count * MemoryLayout<Int32>.size)
        let control = UnsafeMutableRawPointer.allocate(byteCount: max(controlLength, 1), alignment: MemoryLayout<cmsghdr>.alignment)
        defer { control.deallocate() }
        return try withUnsafeMutablePointer(to: &iov) { iovPtr -> Int in
            msg.msg_iov = iovPtr
            msg.msg_iovlen = 1
            if !descriptors.isEmpty {
                control.initializeMemory(as: UInt8.self, repeating: 0, count: controlLength)
                let header = control.assumingMemoryBound(to: cmsghdr.self)
                header.pointee.cmsg_level = SOL_SOCKET
                header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                header.pointee.cmsg_len = cmsgLen(descriptors.count * MemoryLayout<Int32>.size)
                let data = control.advanced(by: cmsgLen(0))
                for (i, d) in descriptors.enumerated() {
                    data.storeBytes(of: d, toByteOffset: i * MemoryLayout<Int32>.size, as: Int32.self)
                }
                msg.msg_control = control
                msg.msg_controllen = controlLength
            }
            while true {
                let n = sendmsg(fd, &msg, Int32(MSG_NOSIGNAL))
                if n >= 0 { return n }
                if errno == EINTR { continue }
                throw SystemError("sendmsg")
            }
        }
    }

    /// The next frame and the descriptors that came with it; nil at end of
    /// file. Received descriptors are close-on-exec.
    public func receiveFrame() throws -> (payload: [UInt8], descriptors: [Int32])? {
        var descriptors: [Int32] = []
        guard let header = try receiveExactly(4, descriptors: &descriptors) else {
            descriptors.forEach { Glibc.close($0) }
            return nil
        }
        let length = Int(header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }.bigEndian)
        guard length <= Self.maxFrame else {
            descriptors.forEach { Glibc.close($0) }
            throw SystemError("frame of \(length) bytes", errno: EMSGSIZE)
        }
        guard let payload = try receiveExactly(length, descriptors: &descriptors) else {
            descriptors.forEach { Glibc.close($0) }
            throw SystemError("truncated frame", errno: EPIPE)
        }
        return (payload, descriptors)
    }

    private func receiveExactly(_ count: Int, descriptors: inout [Int32]) throws -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        let controlLength = cmsgSpace(Self.maxDescriptors * MemoryLayout<Int32>.size)
        let control = UnsafeMutableRawPointer.allocate(byteCount: controlLength, alignment: MemoryLayout<cmsghdr>.alignment)
        defer { control.deallocate() }
        while got < count {
            let n = out.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                var iov = iovec(iov_base: base.advanced(by: got), iov_len: count - got)
                var msg = msghdr()
                return withUnsafeMutablePointer(to: &iov) { iovPtr in
                    msg.msg_iov = iovPtr
                    msg.msg_iovlen = 1
                    msg.msg_control = control
                    msg.msg_controllen = controlLength
                    let n = recvmsg(fd, &msg, Int32(MSG_CMSG_CLOEXEC))
                    if n > 0 { collectDescriptors(&msg, into: &descriptors) }
                    return n
                }
            }
            if n == 0 { return got == 0 ? nil : (count == 0 ? out : nil) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("recvmsg")
            }
            got += n
        }
        return out
    }

    private func collectDescriptors(_ msg: inout msghdr, into descriptors: inout [Int32]) {
        guard let control = msg.msg_control, msg.msg_controllen >= MemoryLayout<cmsghdr>.size else { return }
        var offset = 0
        while offset + MemoryLayout<cmsghdr>.size <= msg.msg_controllen {
            let header = control.advanced(by: offset).assumingMemoryBound(to: cmsghdr.self).pointee
            guard header.cmsg_len >= cmsgLen(0) else { break }
            if header.cmsg_level == SOL_SOCKET && header.cmsg_type == Int32(SCM_RIGHTS) {
                let count = (Int(header.cmsg_len) - cmsgLen(0)) / MemoryLayout<Int32>.size
                let data = control.advanced(by: offset + cmsgLen(0))
                for i in 0..<count {
                    descriptors.append(data.loadUnaligned(fromByteOffset: i * MemoryLayout<Int32>.size, as: Int32.self))
                }
            }
            offset += cmsgAlign(Int(header.cmsg_len))
        }
    }
}

private func cmsgAlign(_ n: Int) -> Int { (n + MemoryLayout<Int>.size - 1) & ~(MemoryLayout<Int>.size - 1) }
private func cmsgLen(_ n: Int) -> Int { cmsgAlign(MemoryLayout<cmsghdr>.size) + n }
private func cmsgSpace(_ n: Int) -> Int { cmsgAlign(MemoryLayout<cmsghdr>.size) + cmsgAlign(n) }
