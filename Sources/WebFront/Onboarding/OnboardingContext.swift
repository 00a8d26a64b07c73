import Hummingbird
import NIOCore

/// A request on the onboarding listener, with the addresses the pages
/// need: the one the device reached (the PAC points at the proxy there)
/// and the device's own (downloads are counted per client).
public struct OnboardingContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let localAddress: SocketAddress?
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        localAddress = source.channel.localAddress
        remoteAddress = source.channel.remoteAddress
    }
}
