import NIOHTTP1

/// Presence as a hook: a request marks its device as seen (at most once a second).
struct PresenceHook: ExchangeHook {
    let presence: PresenceTouch

    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) { presence.touch() }
}
