import Foundation

/// What a refused handshake must be weighed against before it pins a host.
/// Every process on a machine shares its address, and a client without our
/// CA refuses every host alike, so one refusal says nothing. Certificate
/// pinning looks different: the same client completes intercepted
/// handshakes with other hosts, and refuses this one again and again.
/// Both tables are bounded (the stalest entries go first); not thread-safe:
/// `Interception` keeps it under a lock.
struct PinEvidence {
    /// How recent the other handshakes and the earlier refusal must be.
    static let window: TimeInterval = 600
    /// Refusals of one host by one client, within the window, that pin it.
    static let strikesToPin = 2
    static let maxClients = 4_096
    static let maxHostsPerClient = 64
    static let maxStrikes = 4_096

    /// Client IP → host → when it last completed an intercepted handshake for it.
    private var trusted: [String: [String: Date]] = [:]
    /// "ip host" → the refusals within the window, oldest first.
    private var strikes: [String: [Date]] = [:]

    mutating func trusted(client ip: String, host: String, at now: Date = Date()) {
        if trusted[ip] == nil, trusted.count >= Self.maxClients, let stalest = trusted.min(by: { latest($0.value) < latest($1.value) })?.key
        {
            trusted[stalest] = nil
        }
        var hosts = trusted[ip] ?? [:]
        if hosts[host] == nil, hosts.count >= Self.maxHostsPerClient, let stalest = hosts.min(by: { $0.value < $1.value })?.key {
            hosts[stalest] = nil
        }
        hosts[host] = now
        trusted[ip] = hosts
    }

    /// Whether `ip` completed an intercepted handshake with a host other
    /// than `host` within the window.
    func trustsUsElsewhere(client ip: String, besides host: String, at now: Date = Date()) -> Bool {
        trusted[ip]?.contains { $0.key != host && now.timeIntervalSince($0.value) <= Self.window } ?? false
    }

    /// Counts a refusal; the refusals of `host` by `ip` within the window, this one included.
    mutating func strike(client ip: String, host: String, at now: Date = Date()) -> Int {
        let key = "\(ip) \(host)"
        if strikes[key] == nil, strikes.count >= Self.maxStrikes,
            let stalest = strikes.min(by: { ($0.value.last ?? .distantPast) < ($1.value.last ?? .distantPast) })?.key
        {
            strikes[stalest] = nil
        }
        var recent = (strikes[key] ?? []).filter { now.timeIntervalSince($0) <= Self.window }.suffix(Self.strikesToPin - 1)
        recent.append(now)
        strikes[key] = Array(recent)
        return recent.count
    }

    /// A pin was removed (or expired): its strikes start again.
    mutating func forget(host: String) {
        strikes = strikes.filter { !$0.key.hasSuffix(" \(host)") }
    }

    private func latest(_ hosts: [String: Date]) -> Date { hosts.values.max() ?? .distantPast }
}
