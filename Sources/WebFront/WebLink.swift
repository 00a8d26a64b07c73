import BusymateShared
import Foundation
import Logging

/// The web front's link to the supervisor, as the tunnel has one: it says
/// hello (with copies of its listener, so a new supervisor can adopt it),
/// answers pings, and attaches again to whichever supervisor runs next.
actor WebLink {
    private let paths: GroupPaths
    private let listeners: [ListenSocket]
    private var link: LinkConnection?
    private let logger = Logger(label: "busymate.ipc")

    init(paths: GroupPaths, listeners: [ListenSocket]) {
        self.paths = paths
        self.listeners = listeners
    }

    func attachIfNeeded() {
        guard link == nil, FileManager.default.fileExists(atPath: paths.controlSocket.path) else { return }
        let connection: LinkConnection
        do {
            connection = LinkConnection(socket: try UnixSocket.connect(path: paths.controlSocket.path))
            try connection.send(
                ControlMessage(.hello, pid: getpid(), listeners: listeners.map(\.name), state: .ready, role: "web"),
                descriptors: listeners.map(\.descriptor))
        } catch {
            logger.debug("supervisor not reachable yet", metadata: ["ERROR": "\(error)"])
            return
        }
        link = connection
        logger.info("attached to the supervisor")
        let messages = connection.messages(name: "busymate-web-link")
        Task { [weak self] in
            for await incoming in messages {
                incoming.descriptors.forEach { close($0) }
                if incoming.message.kind == .ping {
                    try? connection.send(ControlMessage(.pong, seq: incoming.message.seq))
                }
            }
            await self?.ended(connection)
        }
    }

    private func ended(_ connection: LinkConnection) {
        guard link === connection else { return }
        link = nil
        logger.notice("the supervisor went away; serving on and waiting for the next one")
    }

    func detach() {
        link?.close()
        link = nil
    }
}
