import BusymateShared
import Foundation
import Logging

/// `control.sock`: the CLI's way in and the tunnel's link. Every peer is
/// checked with `SO_PEERCRED`: root, this process's own user, or a member of
/// group busymate.
final class ControlServer: Sendable {
    private let listener: UnixSocket
    private let logger = Logger(label: "busymate.ipc")
    private let allowedGroup: UInt32?

    struct Peer: Sendable {
        let connection: LinkConnection
        let credentials: PeerCredentials
    }

    init(paths: GroupPaths) throws {
        listener = try UnixSocket.bind(path: paths.controlSocket.path, type: Int32(SOCK_STREAM.rawValue), mode: 0o660)
        allowedGroup = PrivilegeDrop.lookupGroup("busymate")
        if geteuid() == 0, let allowedGroup { chown(paths.controlSocket.path, 0, allowedGroup) }
    }

    func isAllowed(_ credentials: PeerCredentials) -> Bool {
        if credentials.uid == 0 || credentials.uid == geteuid() { return true }
        guard let allowedGroup else { return false }
        return credentials.gid == allowedGroup || PrivilegeDrop.user(credentials.uid, isMemberOf: allowedGroup)
    }

    /// Accepted, permitted peers. Refused ones are told why and logged.
    func peers() -> AsyncStream<Peer> {
        let (stream, continuation) = AsyncStream.makeStream(of: Peer.self)
        let thread = Thread { [self] in
            while true {
                guard let socket = try? listener.accept() else { break }
                guard let credentials = socket.peerCredentials() else { continue }
                let connection = LinkConnection(socket: socket)
                guard isAllowed(credentials) else {
                    logger.warning(
                        "refused a control connection", metadata: ["PEER_UID": "\(credentials.uid)", "PEER_PID": "\(credentials.pid)"])
                    try? connection.send(
                        .reply(ok: false, "permission denied: uid \(credentials.uid) is neither root nor in group busymate"))
                    socket.close()
                    continue
                }
                continuation.yield(Peer(connection: connection, credentials: credentials))
            }
            continuation.finish()
        }
        thread.name = "busymate-control"
        thread.start()
        return stream
    }

    func close() {
        listener.shutdown()
    }
}
