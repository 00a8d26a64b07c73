/// The clocks of one client connection that speaks HTTP/1, as events in and
/// actions out (tested without a channel). One timer runs at a time:
///
/// - `head`: from the connection's start, or from the first byte of a
///   request, until its head is whole (`timeouts.request_head_seconds`);
///   what ends slowloris.
/// - `body`: between two pieces of a request body (`timeouts.body_seconds`).
/// - `idle`: a keep-alive connection with nothing in flight
///   (`timeouts.idle_seconds`).
///
/// Nothing runs while a response is awaited or being sent (the server's
/// clock and breakpoints govern that), nor once the connection has left
/// HTTP (a CONNECT tunnel, a 101).
struct ClientTimeoutState: Equatable {
    enum Timer: Equatable { case head, body, idle }

    enum Action: Equatable {
        case none
        /// Start (or restart) this timer, replacing any other.
        case start(Timer)
        case stop
    }

    /// What firing asks for.
    enum Expiry: Equatable {
        /// Not the timer that runs now (it was replaced or stopped): nothing.
        case ignore
        /// Close without a word: nothing was asked.
        case closeQuietly
        /// Answer 408 and close (no response has begun).
        case answer408(Timer)
        /// A response is under way: it cannot be answered, only cut.
        case close(Timer)
    }

    private enum Reading: Equatable { case between, head, body }
    private var reading = Reading.between
    /// Requests whose response has not ended (pipelining allows several).
    private var outstanding = 0
    private var responseStarted = false
    private var left = false
    private(set) var running: Timer?

    /// A new connection: its first head is due within the head timeout.
    mutating func connectionStarted() -> Action { set(.head) }

    mutating func bytesArrived() -> Action {
        guard !left, reading == .between else { return .none }
        reading = .head
        return outstanding == 0 ? set(.head) : .none
    }

    mutating func requestHead() -> Action {
        guard !left else { return .none }
        reading = .body
        outstanding += 1
        return set(.body)
    }

    mutating func requestBody() -> Action {
        guard !left, reading == .body else { return .none }
        return set(.body)
    }

    mutating func requestEnd() -> Action {
        guard !left else { return .none }
        reading = .between
        // Waiting for the answer: the server's clock, not the client's.
        return set(nil)
    }

    /// A final (not 1xx) response head went out.
    mutating func responseHead() -> Action {
        responseStarted = true
        return .none
    }

    mutating func responseEnd() -> Action {
        guard !left else { return .none }
        responseStarted = false
        outstanding = max(0, outstanding - 1)
        guard outstanding == 0 else { return .none }
        switch reading {
        case .between: return set(.idle)
        case .head: return set(.head)
        case .body: return set(.body)
        }
    }

    /// CONNECT or a 101: the bytes are no longer HTTP.
    mutating func leftHTTP() -> Action {
        left = true
        return set(nil)
    }

    mutating func fired(_ timer: Timer) -> Expiry {
        guard running == timer else { return .ignore }
        running = nil
        switch timer {
        case .idle: return .closeQuietly
        // A connection that never sent a byte: nothing to answer.
        case .head where reading == .between: return .closeQuietly
        case .head, .body: return responseStarted ? .close(timer) : .answer408(timer)
        }
    }

    private mutating func set(_ timer: Timer?) -> Action {
        if timer == nil && running == nil { return .none }
        running = timer
        return timer.map(Action.start) ?? .stop
    }
}
