import NIOCore
import NIOHTTP1

/// One HTTP/1 client connection as events in and actions out: the requests
/// the decoder hands up (one exchange at a time; pipelined ones wait), the
/// responses going out, the client's clocks, the drain and the client's
/// half-close. The connection's in-flight count lives here and nowhere
/// else. The clock is injected: every event that may move a deadline takes
/// `now`, and `deadline` says when the connection next wants to be woken.
///
/// The clocks, one at a time:
/// - `head`: from the connection's start, or from the first byte of a head,
///   until the head is whole (`timeouts.request_head_seconds`);
/// - `body`: between two pieces of a request body (`timeouts.body_seconds`);
/// - `idle`: a kept-alive connection with nothing in flight (`timeouts.idle_seconds`);
/// - `drain`: while the tunnel drains, how long an idle connection may take
///   to send one last request.
/// None runs while a response is awaited (the server's clock governs that)
/// or once the connection has left HTTP (CONNECT, `101`).
struct HTTP1ConnectionStateMachine {
    struct Clocks: Equatable {
        var head: TimeAmount
        var body: TimeAmount
        var idle: TimeAmount
        var drain: TimeAmount
    }

    enum Timer: Equatable { case head, body, idle, drain }

    /// What reaches the connection from below, in arrival order.
    enum Inbound: Equatable {
        case part(HTTPServerRequestPart)
        case malformed(HTTPParserError)
        case inputClosed
    }

    /// Where the decoder is in the client's bytes (ahead of the exchange when requests are pipelined).
    private enum Decoder { case between, head, body }

    /// The exchange handed up: one at a time.
    private struct Exchange {
        var requestEnded = false
        var response = Response.awaited
        /// CONNECT, or a request asking to upgrade (llhttp's rule): NIO's
        /// decoder parses nothing after it, whatever the answer.
        var leavesDecoder = false
        /// Its final answer declined the CONNECT or the upgrade: the last.
        var declined = false
    }

    private enum Response { case awaited, started, ended }

    private enum Drain {
        case serving
        /// Draining: the next exchange handed up is the last.
        case draining
        /// The exchange under way is the last: its head says `Connection: close`.
        case last
    }

    private let clocks: Clocks
    private var decoder = Decoder.between
    private var exchange: Exchange?
    private var drain = Drain.serving
    private var inputClosed = false
    private var leftHTTP = false
    /// The connection is being closed: nothing more goes up, nothing is read.
    private var closing = false
    /// Pipelined requests (and what came after them) waiting for the exchange under way.
    private var waiting = CircularBuffer<Inbound>()
    private var readPending = false
    /// The decoder refused the client's bytes: it parses no more of them.
    private(set) var refusedBytes = false
    private(set) var deadline: (timer: Timer, at: NIODeadline)?

    init(clocks: Clocks) { self.clocks = clocks }

    /// The decoder is inside a request (head whole, end not yet): the
    /// next bytes are no request line.
    var readingRequest: Bool { decoder == .body }

    /// The exchange under way has its request and waits for its response
    /// to end: later requests wait too, and the socket is not read.
    private var busy: Bool { exchange?.requestEnded == true }

    mutating func connectionStarted(now: NIODeadline) {
        guard !closing, !leftHTTP else { return }
        set(.head, now)
    }

    /// Bytes came from the client (before decoding): a head's clock starts at its first byte.
    mutating func bytesArrived(now: NIODeadline) {
        guard !leftHTTP, !closing, decoder == .between else { return }
        decoder = .head
        if exchange == nil, drain == .serving { set(.head, now) }
    }

    mutating func inbound(_ item: Inbound, now: NIODeadline) -> InboundAction {
        track(item)
        return take(item, now: now, waited: false)
    }

    /// The next waiting item that may go up now, and what to do with it.
    mutating func nextWaiting(now: NIODeadline) -> (Inbound, InboundAction)? {
        guard !closing, let first = waiting.first else { return nil }
        // A half-close at the front is news for the exchange under way, busy or not.
        guard !busy || first == .inputClosed else { return nil }
        waiting.removeFirst()
        return (first, take(first, now: now, waited: true))
    }

    private mutating func track(_ item: Inbound) {
        if case .malformed = item { refusedBytes = true }
        guard case let .part(part) = item else { return }
        switch part {
        case .head: decoder = .body
        case .body: break
        case .end: decoder = .between
        }
    }

    private mutating func take(_ item: Inbound, now: NIODeadline, waited: Bool) -> InboundAction {
        if closing { return .drop }
        // Behind a request that is still being answered, or behind what
        // already waits. A half-close alone is news for the exchange under way.
        let behind = item == .inputClosed ? !waiting.isEmpty : busy || !waiting.isEmpty
        if !waited, behind {
            waiting.append(item)
            return .wait
        }
        // The connection ended mid-message: the exchange reading it learns so;
        // a head that never came whole is nobody's (the half-close that follows closes).
        if case .malformed(.invalidEOFState) = item { return exchange == nil ? .drop : .passOn }
        switch item {
        case let .part(.head(head)):
            exchange = Exchange(leavesDecoder: Self.leavesDecoder(head))
            if drain == .draining { drain = .last }
            if head.method == .CONNECT {
                leftHTTP = true
                deadline = nil
            } else {
                set(.body, now)
            }
            return .deliver
        case .part(.body):
            if exchange?.requestEnded == false { set(.body, now) }
            return .deliver
        case .part(.end):
            guard var current = exchange else { return .deliver }
            current.requestEnded = true
            guard current.response == .ended else {
                exchange = current
                deadline = nil
                return .deliver
            }
            exchange = nil
            if drain == .last || inputClosed || current.declined {
                finish()
                return .deliverThenClose
            }
            settle(now)
            return .deliver
        case let .malformed(error):
            closing = true
            deadline = nil
            waiting.removeAll()
            let answer = exchange.map { $0.response == .awaited } ?? true
            // A request the exchange handler has begun is its row; one that never parsed is ours.
            let recordRow = exchange.map { $0.requestEnded } ?? true
            return .refuse(error, answer: answer, recordRow: recordRow)
        case .inputClosed:
            inputClosed = true
            return .inputClosed(closeNow: exchange == nil)
        }
    }

    /// A response head is going out: whether it must say `Connection: close`.
    mutating func responseHead(_ status: HTTPResponseStatus) -> HeadAction {
        if status == .switchingProtocols {
            // No longer HTTP: neither a drain nor a half-close closes it after this answer.
            leftHTTP = true
            deadline = nil
            if drain == .last { drain = .draining }
            inputClosed = false
            return .write
        }
        guard status.code >= 200, let current = exchange else { return .write }
        exchange?.response = .started
        if drain == .draining { drain = .last }
        // A final answer to an upgrade, or to a CONNECT that reached here
        // (one the proxy takes leaves before its answer; this one went to an
        // origin), declines it, and NIO's decoder will parse nothing more: the
        // connection ends with this answer (the client's next request would
        // hang until its head clock ran out).
        if current.leavesDecoder {
            exchange?.declined = true
            return .writeSayingClose
        }
        return drain == .last || inputClosed ? .writeSayingClose : .write
    }

    /// A response ended.
    mutating func responseEnd(now: NIODeadline) -> EndAction {
        guard var current = exchange else { return .write }
        if leftHTTP, !current.declined {
            exchange = nil
            return .write
        }
        current.response = .ended
        // Answered before the request ended (a refusal, an early error): the rest is still read.
        guard current.requestEnded else {
            exchange = current
            return .write
        }
        exchange = nil
        if drain == .last || inputClosed || current.declined {
            finish()
            return .writeThenClose
        }
        settle(now)
        return .write
    }

    /// llhttp's rule (`llhttp__before_headers_complete`): a CONNECT, or an
    /// `Upgrade` header with an `upgrade` token in `Connection` or in
    /// `Proxy-Connection` (llhttp reads both alike).
    static func leavesDecoder(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        guard head.headers.contains(name: "upgrade") else { return false }
        let tokens = head.headers[canonicalForm: "connection"] + head.headers[canonicalForm: "proxy-connection"]
        return tokens.contains { $0.lowercased() == "upgrade" }
    }

    /// The tunnel is draining: each connection gets one more exchange, told it is the last.
    mutating func quiesce(now: NIODeadline) {
        guard drain == .serving, !closing, !leftHTTP else { return }
        guard let current = exchange else {
            drain = .draining
            if waiting.isEmpty { set(.drain, now) }
            return
        }
        drain = current.response == .awaited ? .last : .draining
    }

    /// The wake-up came: what the clock that ran out asks for.
    mutating func timerFired(now: NIODeadline) -> Expiry {
        guard let (timer, at) = deadline else { return .ignore }
        guard now >= at else { return .notYet }
        deadline = nil
        closing = true
        waiting.removeAll()
        switch timer {
        case .idle, .drain: return .closeQuietly(timer)
        // A connection that never sent a byte: nothing to answer.
        case .head where decoder == .between: return .closeQuietly(timer)
        case .head: return .answer408(timer)
        case .body: return exchange?.response == .awaited ? .answer408(timer) : .close(timer)
        }
    }

    /// NIO asks to read: whether to, now.
    mutating func read() -> Bool {
        if closing { return false }
        if busy || !waiting.isEmpty {
            readPending = true
            return false
        }
        return true
    }

    /// Whether a read was held back and may go now.
    mutating func takeReadPending() -> Bool {
        guard readPending, !busy, waiting.isEmpty, !closing else { return false }
        readPending = false
        return true
    }

    /// The layer is leaving (CONNECT, `101`): what waits goes to whatever comes next.
    mutating func leave() -> (waiting: [Inbound], read: Bool) {
        defer {
            waiting.removeAll()
            readPending = false
            deadline = nil
        }
        return (Array(waiting), readPending)
    }

    mutating func connectionClosed() { finish() }

    /// The last exchange is done: the connection closes, and what came after it is dropped.
    private mutating func finish() {
        closing = true
        waiting.removeAll()
        deadline = nil
    }

    /// Nothing in flight: which clock runs until the next request.
    private mutating func settle(_ now: NIODeadline) {
        guard !leftHTTP else { return }
        if drain == .draining {
            if waiting.isEmpty { set(.drain, now) } else { deadline = nil }
            return
        }
        set(decoder == .head ? .head : .idle, now)
    }

    private mutating func set(_ timer: Timer, _ now: NIODeadline) {
        let amount: TimeAmount
        switch timer {
        case .head: amount = clocks.head
        case .body: amount = clocks.body
        case .idle: amount = clocks.idle
        case .drain: amount = clocks.drain
        }
        deadline = (timer, now + amount)
    }
}
