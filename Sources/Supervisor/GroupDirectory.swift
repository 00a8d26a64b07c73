import BusymateShared
import Foundation
import Logging

/// Creates the group directory from the skeleton and gives every part the
/// owner and mode DESIGN fixes, so the tunnel (group busymate) can read
/// `ca.key` and write the store, and nothing more.
enum GroupDirectory {
    static let readme = """
        # Busymate group directory

        Shared by `busymate-app` (the supervisor) and `busymate-tunnel`. Edit
        `settings.json` with any editor: both processes apply a save within a
        second. Everything else here is written by the processes themselves.

        | path | what |
        |---|---|
        | settings.json | all settings (hot-reloaded) |
        | ca.pem, ca.der, ca.key | the interception CA (the key is never world-readable) |
        | status.json | the tunnel's live status |
        | notify/ | notification sockets, one per process |
        | control.sock | the supervisor's control socket (for the `busymate` CLI) |
        | capture.sqlite, bodies/ | the capture store |

        """

    static func prepare(_ paths: GroupPaths, logger: Logger) throws {
        let fm = FileManager.default
        try fm.createDirectory(at: paths.root, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.notifyDirectory, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.bodies, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.privateDirectory, withIntermediateDirectories: true)
        if !fm.fileExists(atPath: paths.settings.path) {
            try AtomicFile.write(Data(AppSettings.defaultDocument.utf8), to: paths.settings, mode: 0o664)
            logger.info("created settings.json from the skeleton", metadata: ["PATH": "\(paths.settings.path)"])
        }
        if !fm.fileExists(atPath: paths.readme.path) {
            try AtomicFile.write(Data(readme.utf8), to: paths.readme, mode: 0o644)
        }
        let group = PrivilegeDrop.lookupGroup("busymate")
        let asRoot = geteuid() == 0
        // setgid: new files get group busymate; sticky: only a file's owner
        // may replace it, so the tunnel cannot swap the CA.
        apply(paths.root, mode: 0o3775, group: group, asRoot: asRoot)
        apply(paths.notifyDirectory, mode: 0o2770, group: group, asRoot: asRoot)
        apply(paths.bodies, mode: 0o2770, group: group, asRoot: asRoot)
        apply(paths.settings, mode: 0o664, group: group, asRoot: asRoot)
        apply(paths.privateDirectory, mode: 0o700, group: asRoot ? 0 : nil, asRoot: asRoot)
        if asRoot && group == nil {
            logger.warning("group busymate does not exist; the tunnel cannot drop privileges until it does (systemd-sysusers units/busymate.sysusers)")
        }
    }

    static func apply(_ url: URL, mode: mode_t, group: UInt32?, asRoot: Bool) {
        if asRoot, let group { chown(url.path, 0, group) }
        chmod(url.path, mode)
    }
}
