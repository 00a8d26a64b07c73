import Foundation

/// The readiness card: everything `busymate status` shows. Optional fields
/// are written as `null` rather than left out, so scripts can rely on keys.
public struct StatusReport: Codable, Sendable {
    public struct Supervisor: Codable, Sendable {
        public var running: Bool
        public var pid: Int32?
        public var uptimeSeconds: Double?
        public var settingsSha256: String?
        /// The running supervisor's `BusymateVersion.full`: after an upgrade
        /// that has not restarted it, not the CLI's own.
        public var version: String?
        public init(running: Bool, pid: Int32?, uptimeSeconds: Double?, settingsSha256: String?, version: String? = nil) {
            self.running = running
            self.pid = pid
            self.uptimeSeconds = uptimeSeconds
            self.settingsSha256 = settingsSha256
            self.version = version
        }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(running, forKey: .running)
            try c.encode(pid, forKey: .pid)
            try c.encode(uptimeSeconds, forKey: .uptimeSeconds)
            try c.encode(settingsSha256, forKey: .settingsSha256)
            try c.encode(version, forKey: .version)
        }
    }

    public struct Tunnel: Codable, Sendable {
        public var pid: Int32?
        public var uid: UInt32?
        public var state: TunnelState
        public var privileges: String?
        public var settingsSha256: String?
        public var settingsError: String?
        public var startedAt: Date?
        public var restarts: Int
        public var crashLoop: Bool
        public var lastExit: String?
        public var nextRestartInSeconds: Double?
        public var adopted: Bool
        public var interception: String?
        /// "ok", or what is wrong with the capture store.
        public var store: String?
        /// A problem the tunnel reports while serving (e.g. an unusable upstream trust bundle).
        public var lastError: String?
        /// A new tunnel started to replace this one that has not taken over yet.
        public var replacement: Replacement?

        public struct Replacement: Codable, Sendable {
            public var pid: Int32
            public var state: TunnelState
            public var startedAt: Date
            public var attached: Bool
            /// Killed then unless it attaches (`busymate-app --attach-deadline`).
            public var killInSeconds: Double?
            public init(pid: Int32, state: TunnelState, startedAt: Date, attached: Bool, killInSeconds: Double?) {
                self.pid = pid
                self.state = state
                self.startedAt = startedAt
                self.attached = attached
                self.killInSeconds = killInSeconds
            }
        }
        public init(
            pid: Int32?, uid: UInt32?, state: TunnelState, privileges: String?, settingsSha256: String?, settingsError: String?,
            startedAt: Date?, restarts: Int, crashLoop: Bool, lastExit: String?, nextRestartInSeconds: Double?, adopted: Bool,
            interception: String? = nil, lastError: String? = nil, store: String? = nil
        ) {
            self.pid = pid
            self.uid = uid
            self.state = state
            self.privileges = privileges
            self.settingsSha256 = settingsSha256
            self.settingsError = settingsError
            self.startedAt = startedAt
            self.restarts = restarts
            self.crashLoop = crashLoop
            self.lastExit = lastExit
            self.nextRestartInSeconds = nextRestartInSeconds
            self.adopted = adopted
            self.interception = interception
            self.lastError = lastError
            self.store = store
        }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(pid, forKey: .pid)
            try c.encode(uid, forKey: .uid)
            try c.encode(state, forKey: .state)
            try c.encode(privileges, forKey: .privileges)
            try c.encode(settingsSha256, forKey: .settingsSha256)
            try c.encode(settingsError, forKey: .settingsError)
            try c.encode(startedAt, forKey: .startedAt)
            try c.encode(restarts, forKey: .restarts)
            try c.encode(crashLoop, forKey: .crashLoop)
            try c.encode(lastExit, forKey: .lastExit)
            try c.encode(nextRestartInSeconds, forKey: .nextRestartInSeconds)
            try c.encode(adopted, forKey: .adopted)
            try c.encode(interception, forKey: .interception)
            try c.encode(lastError, forKey: .lastError)
            try c.encode(store, forKey: .store)
            try c.encode(replacement, forKey: .replacement)
        }
    }

    public struct CA: Codable, Sendable {
        public var present: Bool
        public var trusted: Bool
        public var error: String?
        public var subject: String?
        public var fingerprintSha256: String?
        public var notAfter: Date?
        public init(present: Bool, trusted: Bool, error: String?, subject: String?, fingerprintSha256: String?, notAfter: Date?) {
            self.present = present
            self.trusted = trusted
            self.error = error
            self.subject = subject
            self.fingerprintSha256 = fingerprintSha256
            self.notAfter = notAfter
        }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(present, forKey: .present)
            try c.encode(trusted, forKey: .trusted)
            try c.encode(error, forKey: .error)
            try c.encode(subject, forKey: .subject)
            try c.encode(fingerprintSha256, forKey: .fingerprintSha256)
            try c.encode(notAfter, forKey: .notAfter)
        }
    }

    public struct Settings: Codable, Sendable {
        public var path: String
        public var valid: Bool
        public var error: String?
        public var unknownKeys: [String]
        public init(path: String, valid: Bool, error: String?, unknownKeys: [String]) {
            self.path = path
            self.valid = valid
            self.error = error
            self.unknownKeys = unknownKeys
        }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(path, forKey: .path)
            try c.encode(valid, forKey: .valid)
            try c.encode(error, forKey: .error)
            try c.encode(unknownKeys, forKey: .unknownKeys)
        }
    }

    /// The web front (`busymate-web`), kept like the tunnel.
    /// The onboarding listener (`onboarding.listen`), served by the web front.
    public struct Onboarding: Codable, Sendable {
        public var listen: String
        public var bound: String?
        public var error: String?
        /// Devices it serves would be refused a PAC (`AppSettings.onboardingWarning`).
        public var warning: String?
        public init(listen: String, bound: String?, error: String?) {
            self.listen = listen
            self.bound = bound
            self.error = error
        }
    }

    public struct Web: Codable, Sendable {
        public var state: TunnelState
        public var pid: Int32?
        public var listen: String
        public var bound: String?
        public var error: String?
        public var restarts: Int
        public var lastExit: String?
        public var adopted: Bool
        public var onboarding: Onboarding?
        public init(
            state: TunnelState, pid: Int32?, listen: String, bound: String?, error: String?, restarts: Int, lastExit: String?, adopted: Bool
        ) {
            self.state = state
            self.pid = pid
            self.listen = listen
            self.bound = bound
            self.error = error
            self.restarts = restarts
            self.lastExit = lastExit
            self.adopted = adopted
        }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(state, forKey: .state)
            try c.encode(pid, forKey: .pid)
            try c.encode(listen, forKey: .listen)
            try c.encode(bound, forKey: .bound)
            try c.encode(error, forKey: .error)
            try c.encode(restarts, forKey: .restarts)
            try c.encode(lastExit, forKey: .lastExit)
            try c.encode(adopted, forKey: .adopted)
            try c.encode(onboarding, forKey: .onboarding)
        }
    }

    public var group: String
    public var mode: String
    public var supervisor: Supervisor
    public var tunnel: Tunnel
    public var listeners: [ListenerStatus]
    public var ca: CA
    public var settings: Settings
    public var counters: TrafficCounters
    public var web: Web?
    public var network: NetworkStatus?
    /// Filled by the reader (CLI, web front), which reads the store.
    public var devices: [DeviceRow]?
    /// The pairing and the cloud sinks (nil from an older supervisor).
    public var cloud: CloudReport?

    public init(
        group: String, mode: String, supervisor: Supervisor, tunnel: Tunnel, listeners: [ListenerStatus], ca: CA, settings: Settings,
        counters: TrafficCounters
    ) {
        self.group = group
        self.mode = mode
        self.supervisor = supervisor
        self.tunnel = tunnel
        self.listeners = listeners
        self.ca = ca
        self.settings = settings
        self.counters = counters
    }
}
