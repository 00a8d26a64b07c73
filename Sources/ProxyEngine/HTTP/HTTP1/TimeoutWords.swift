/// How a timeout is named to the user: what did not happen, and the setting.
enum TimeoutWords {
    static func words(_ timer: HTTP1ConnectionStateMachine.Timer) -> (what: String, key: String) {
        switch timer {
        case .head: return ("the request head did not arrive whole", "timeouts.request_head_seconds")
        case .body: return ("the request body sent nothing", "timeouts.body_seconds")
        case .idle: return ("the keep-alive connection sent no request", "timeouts.idle_seconds")
        case .drain: return ("the kept-alive connection sent no request while the tunnel drained", "tunnel.drain_seconds")
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
