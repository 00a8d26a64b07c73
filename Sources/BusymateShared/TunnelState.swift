/// Where the tunnel is in its life, as the supervisor and `status` see it.
public enum TunnelState: String, Codable, Sendable {
    /// Spawned, not serving yet.
    case starting
    /// Accepting on every listener.
    case ready
    /// Replaced or stopping: finishing requests in flight, accepting nothing.
    case draining
    /// Exited unexpectedly; a restart is scheduled.
    case restarting
    /// Turned off with `busymate tunnel stop` (the VPN toggle).
    case stopped
    /// Cannot start (for example a missing user); retried with backoff.
    case failed
    /// No tunnel and no supervisor to say more.
    case absent
}

/// The tunnel's exit status when it cannot start at all (EX_CONFIG, e.g. its
/// user is missing); the supervisor then retries with backoff and says why.
public enum TunnelExitStatus {
    public static let cannotStart: Int32 = 78
}
