import NIOHTTP1

extension HTTP1ConnectionStateMachine {
    /// What to do with an item from below.
    enum InboundAction: Equatable {
        /// Hand it to the exchange handler.
        case deliver
        /// Hand it up; that was the last exchange's end: close once it is answered (it is).
        case deliverThenClose
        /// Kept until the exchange under way has been answered.
        case wait
        /// The connection is closing: dropped.
        case drop
        /// Not this layer's to act on (the connection ended mid-message): pass the error on.
        case passOn
        /// Malformed: answer it (unless a response has begun), record its row
        /// (unless the exchange handler has it), pass the error on; the decoder closes.
        case refuse(HTTPParserError, answer: Bool, recordRow: Bool)
        /// The client shut its write side: tell the exchange; close now when nothing is in flight.
        case inputClosed(closeNow: Bool)
    }

    enum HeadAction: Equatable {
        case write
        /// Draining, or the client has half-closed: this exchange is the last.
        case writeSayingClose
    }

    enum EndAction: Equatable {
        /// Then hand up what waited, and read again.
        case write
        /// The last exchange: close once it is out.
        case writeThenClose
    }

    /// What a clock running out asks for.
    enum Expiry: Equatable {
        /// No clock runs (it was stopped, or the connection is closing).
        case ignore
        /// The deadline moved later: sleep again.
        case notYet
        /// Nothing was asked: close without a word.
        case closeQuietly(Timer)
        /// Answer 408 and close: no response has begun.
        case answer408(Timer)
        /// A response is under way or done: it cannot be answered, only cut.
        case close(Timer)
    }
}
