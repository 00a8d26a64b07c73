import BusymateShared
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// `busymate-web`'s whole program, reachable from tests.
public enum WebMain {
    public struct Prepared: Sendable {
        let paths: GroupPaths
        let listener: ListenSocket
        /// The onboarding pages' socket (`onboarding.listen`), when set.
        let onboarding: ListenSocket?
        let token: String
        let supervised: Bool
    }

    /// The onboarding socket's name: `onboarding@host:port`.
    public static let onboardingPrefix = "onboarding@"

    public struct ExitCode: Error, Sendable {
        public let code: Int32
    }

    /// On the main thread, before any other: take (or, standalone, bind) the
    /// listener, give up root, read the token.
    public static func prepare(groupOverride: String?, identity: TunnelIdentity) -> Result<Prepared, ExitCode> {
        let paths = GroupPaths.resolve(explicit: groupOverride)
        let settings = SettingsFile.read(paths.settings).settings ?? AppSettings()
        LogControl.bootstrap(identifier: "busymate-web", level: settings.logLevel)
        let logger = Logger(label: "busymate.web")
        signal(SIGPIPE, SIG_IGN)
        let supervised = ProcessInfo.processInfo.environment["BUSYMATE_SUPERVISED"] == "1"
        let inherited = InheritedListeners.take()
        var listener = inherited.first { !$0.name.hasPrefix(WebMain.onboardingPrefix) }
        let onboarding = inherited.first { $0.name.hasPrefix(WebMain.onboardingPrefix) }
        if listener == nil && !supervised {
            logger.notice("no listener handed over: running standalone and binding web.listen itself")
            do {
                listener = try ListenSocket.bind(settings.webListen)
            } catch {
                logger.critical("cannot listen", metadata: ["LISTENER": "\(settings.webListen)", "ERROR": "\(error)"])
                return .failure(ExitCode(code: TunnelExitStatus.cannotStart))
            }
        }
        guard let listener else {
            logger.critical("started by the supervisor without a listener")
            return .failure(ExitCode(code: TunnelExitStatus.cannotStart))
        }
        do {
            switch try PrivilegeDrop.drop(user: identity.user, group: identity.group) {
            case let .dropped(_, uid, gid):
                logger.info("privileges dropped", metadata: ["UID": "\(uid)", "GID": "\(gid)"])
            case let .unprivileged(uid):
                logger.notice("started without root: nothing to drop, running as uid \(uid)")
            }
        } catch {
            logger.critical("cannot drop privileges; refusing to serve", metadata: ["ERROR": "\(error)"])
            return .failure(ExitCode(code: TunnelExitStatus.cannotStart))
        }
        guard let token = WebToken.read(paths) else {
            logger.critical("no web token: \(paths.webToken.path) is missing or not one (busymate-app writes it at start)")
            return .failure(ExitCode(code: TunnelExitStatus.cannotStart))
        }
        return .success(Prepared(paths: paths, listener: listener, onboarding: onboarding, token: token, supervised: supervised))
    }

    public static func run(_ prepared: Prepared) async -> Int32 {
        let paths = prepared.paths
        let logger = Logger(label: "busymate.web")
        let app = WebApp(paths: paths, token: prepared.token, onboarding: prepared.onboarding?.bound)
        let responder = app.router().buildResponder()
        let notifier = try? Notifier(paths: paths, role: "web")
        let link = WebLink(paths: paths, listeners: [prepared.listener] + (prepared.onboarding.map { [$0] } ?? []))
        if prepared.supervised { await link.attachIfNeeded() }
        logger.info("serving the web page", metadata: ["LISTENER": "\(prepared.listener.bound)"])

        // Read once here, and again when the file changes.
        let onboardingSettings: OnboardingSettings?
        if prepared.onboarding != nil { onboardingSettings = await OnboardingSettings.load(paths) } else { onboardingSettings = nil }
        await app.inForce.reload()

        var jobs: [DaemonJob] = []
        if let notifier {
            jobs.append(
                .notifications(notifier) { note in
                    if note.name == .settingsDidChange {
                        await onboardingSettings?.reload()
                        await app.inForce.reload()
                    }
                    await app.feed.notified(note.name)
                })
        }
        if let watcher = DaemonJob.groupWatcher(
            paths,
            { file in
                if file == .controlSocket { await link.attachIfNeeded() }
                if file == .settings {
                    await onboardingSettings?.reload()
                    await app.inForce.reload()
                }
            })
        {
            jobs.append(watcher)
        }
        jobs.append(
            DaemonJob("live tick") {
                while !Task.isShuttingDownGracefully && !Task.isCancelled {
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
                    await link.attachIfNeeded()
                    await onboardingSettings?.retryIfUnread()
                    await app.feed.tick()
                }
            })
        jobs.append(
            DaemonJob("live poll") {
                while !Task.isShuttingDownGracefully && !Task.isCancelled {
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(100)) }
                    await app.feed.poll()
                }
            })
        if let onboarding = prepared.onboarding, let onboardingSettings {
            logger.info("serving the onboarding pages", metadata: ["LISTENER": "\(onboarding.bound)"])
            jobs.append(
                DaemonJob("onboarding server") {
                    do {
                        try await WebServer.serveOnboarding(
                            descriptor: onboarding.descriptor, paths: paths, settings: onboardingSettings,
                            group: MultiThreadedEventLoopGroup.singleton, logger: logger)
                    } catch {
                        logger.error("the onboarding server stopped", metadata: ["ERROR": "\(error)"])
                    }
                })
        }
        jobs.append(
            DaemonJob("web server", endsDaemon: true) {
                do {
                    try await WebServer.serve(
                        descriptor: prepared.listener.descriptor, responder: responder, group: MultiThreadedEventLoopGroup.singleton,
                        logger: logger
                    ) { await app.feed.finish() }
                } catch {
                    logger.error("the web server stopped", metadata: ["ERROR": "\(error)"])
                }
                await app.feed.finish()
            })
        await DaemonJob.runGroup(jobs, logger: logger)
        await link.detach()
        notifier?.close()
        logger.info("stopped")
        return 0
    }
}
