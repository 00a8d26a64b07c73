import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import HummingbirdWebSocket

/// The web front's routes: the page, the API (docs/web-api.md) and the
/// live feed, behind the token.
public struct WebApp: Sendable {
    public typealias Context = BasicWebSocketRequestContext

    public let paths: GroupPaths
    public let session: WebSession
    public let reader: CaptureReader
    public let feed: LiveFeed
    /// The last good settings, shown while the file does not parse.
    public let inForce: SettingsInForce
    /// The onboarding listener's bound address, where enrolment links point.
    public let onboarding: String?

    public init(paths: GroupPaths, token: String, status: StatusSource? = nil, onboarding: String? = nil) {
        self.paths = paths
        self.onboarding = onboarding
        session = WebSession(token: token)
        reader = CaptureReader(paths: paths)
        inForce = SettingsInForce(url: paths.settings)
        feed = LiveFeed(reader: reader, status: status ?? .supervisor(paths, reader: reader))
    }

    public func router() -> Router<Context> {
        let router = Router(context: Context.self)
        router.add(middleware: WebSecurity<Context>(session: session))
        PageRoutes<Context>(session: session, paths: paths).register(on: router)
        ExchangeRoutes<Context>(reader: reader).register(on: router)
        StatusRoutes<Context>(feed: feed).register(on: router)
        LiveRoutes<Context>(reader: reader, feed: feed).register(on: router)
        HeldRoutes<Context>(reader: reader).register(on: router)
        ResendRoutes<Context>(reader: reader).register(on: router)
        AnnotationRoutes<Context>(reader: reader).register(on: router)
        SettingsRoutes<Context>(reader: reader, inForce: inForce).register(on: router)
        SessionRoutes<Context>(reader: reader, feed: feed).register(on: router)
        DeviceRoutes<Context>(paths: paths, onboarding: onboarding).register(on: router)
        return router
    }
}

struct StatusRoutes<Context: RequestContext> {
    let feed: LiveFeed

    func register(on router: Router<Context>) {
        router.get("/api/status") { _, _ in
            guard let node = await feed.statusNow() else { return WebJSON.error(.serviceUnavailable, "no status") }
            return WebJSON.response(node)
        }
    }
}

extension LiveFeed {
    public func statusNow() async -> JSONNode? { await status.json() }
}
