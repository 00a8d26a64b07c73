import NIOHTTP1
import Testing

@testable import ProxyEngine

/// The stream state machine alone: each case a sequence of events and the
/// actions it must give, no channel involved.
@Suite struct StreamStateMachineTests {
    typealias Machine = StreamStateMachine
    typealias End = Machine.RowEnd
    static let get = Machine.Request()
    static let head = Machine.Request(isHead: true)
    static let closing = Machine.Request(keepAlive: false)
    static let http10 = Machine.Request(keepAlive: false, isHTTP10: true)
    static let upgrade = Machine.Request(upgrade: true)
    static let ok = HTTPResponseStatus.ok

    @Test func aKeptAliveExchangeForwardsEachPartAndEndsIdleWithOneRow() {
        var m = Machine()
        #expect(m.requestHead(Self.get) == .openExchange)
        #expect(m.requestDecided(.forward) == .forwardHead)
        #expect(m.requestBody() == .forward)
        #expect(m.requestEnd() == .forwardEnd)
        #expect(m.requestForwarded() == .wait)
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .write)
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End()))
        #expect(m.isIdle)
        #expect(!m.rowOpen)
        // The next request on the same connection starts afresh.
        #expect(m.begin(Self.get, .forward) == .forwardHead)
    }

    @Test func aClientThatAsksToCloseGetsConnectionCloseAndAClose() {
        var m = Machine()
        _ = m.begin(Self.closing, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: true))
        #expect(m.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false, End()))
    }

    @Test func headAnd204And304AreBodylessWhateverTheirHeadersSay() {
        var m = Machine()
        _ = m.begin(Self.head, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.bodyless, close: false))
        // A body after a HEAD's answer is never passed on.
        #expect(m.responseBody() == .drop)
        _ = m.responseEnd()
        for status in [HTTPResponseStatus.noContent, .notModified] {
            _ = m.begin(Self.get, .forward)
            _ = m.requestEnd()
            #expect(m.responseHead(status: status, hasContentLength: false, isChunked: true) == .writeHead(.bodyless, close: false))
            #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End()))
        }
    }

    @Test func aCloseDelimitedResponseIsChunkedFor11AndClosedFor10() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: Self.ok, hasContentLength: false, isChunked: false) == .writeHead(.chunked, close: false))
        _ = m.responseEnd()
        _ = m.begin(Self.http10, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: Self.ok, hasContentLength: false, isChunked: false) == .writeHead(.closeDelimited, close: true))
        #expect(m.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false, End()))
    }

    @Test func continueAndOther1xxGoOutAndTheRealAnswerFollows() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        // Expect: 100-continue: the server says go before the body is sent.
        #expect(m.responseHead(status: .continue, hasContentLength: false, isChunked: false) == .writeInformational)
        #expect(m.requestBody() == .forward)
        #expect(m.requestEnd() == .forwardEnd)
        #expect(
            m.responseHead(status: .custom(code: 103, reasonPhrase: "Early Hints"), hasContentLength: false, isChunked: false)
                == .writeInformational)
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End()))
    }

    @Test func anHTTP2HeadWithoutALengthGoesAtItsFirstPartOrItsEnd() {
        var m = Machine()
        #expect(m.begin(Self.get, .forwardAtFirstPart) == .awaitFirstPart)
        #expect(m.requestBody() == .forwardHeadThenPart)
        #expect(m.requestBody() == .forward)
        #expect(m.requestEnd() == .forwardEnd)
        _ = m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false)
        _ = m.responseEnd()
        #expect(m.begin(Self.get, .forwardAtFirstPart) == .awaitFirstPart)
        #expect(m.requestEnd() == .forwardHeadThenEnd)
    }

    @Test func a101SwitchesOnceBothHalvesHaveEnded() {
        var m = Machine()
        _ = m.begin(Self.upgrade, .forward)
        #expect(
            m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false) == .writeHead(.bodyless, close: false))
        // The response ends before the request: wait for it.
        #expect(m.responseEnd() == .endSwitch(now: false))
        #expect(m.requestEnd() == .forwardEnd)
        #expect(m.requestForwarded() == .switchProtocols)
        #expect(m.isIdle)
        // The other order.
        _ = m.begin(Self.upgrade, .forward)
        _ = m.requestEnd()
        _ = m.requestForwarded()
        _ = m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false)
        #expect(m.responseEnd() == .endSwitch(now: true))
        // The row goes with the glue, once.
        #expect(m.endRow(nil) == End())
        #expect(m.endRow(nil) == nil)
    }

    @Test func a101NobodyAskedForIsRefused() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false) == .unaskedSwitch)
    }

    @Test func aHeldRequestIsReadWholeThenForwardedWhenReleased() {
        var m = Machine()
        #expect(m.begin(Self.get, .hold) == .hold)
        #expect(m.requestBody() == .hold)
        #expect(m.requestEnd() == .pauseRequest)
        #expect(m.isHolding)
        #expect(m.heldRequestReleased() == .forwardHead)
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End()))
    }

    @Test func aHeldRequestCanBeAnsweredByTheProxyOrGoOnUnheldWhenTooLarge() {
        var m = Machine()
        _ = m.begin(Self.get, .hold)
        _ = m.requestEnd()
        #expect(m.heldRequestAnswered(close: false) == .answer)
        #expect(m.localResponseHead(status: .badGateway, error: "aborted at breakpoint 7") == .writeHead(.asIs, close: false))
        // The row ends with the answer, saying why.
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End(error: "aborted at breakpoint 7")))
        _ = m.begin(Self.get, .hold)
        #expect(m.requestBody() == .hold)
        #expect(m.heldRequestOverflowed() == .forwardHead)
        #expect(m.requestBody() == .forward)
        #expect(m.requestEnd() == .forwardEnd)
    }

    @Test func aHeldResponseIsReadWholeThenWrittenWhenReleased() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false, hold: true) == .hold)
        #expect(m.responseBody() == .hold)
        #expect(m.responseEnd() == .pauseResponse)
        // The server closing now changes nothing: the response is read whole.
        #expect(m.upstreamFailed("reset") == .ignore)
        #expect(m.heldResponseReleased(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .write)
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End()))
    }

    @Test func aBlockOrLocalAnswerDropsTheRestOfTheRequest() {
        var m = Machine()
        #expect(m.begin(Self.get, .answer(close: false)) == .answer)
        #expect(m.localResponseHead(status: .forbidden, error: nil) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .write)
        // Answered before the request ended: not done until its end is read.
        #expect(m.responseEnd() == .writeEnd(close: false, done: false, releaseUpstream: false, End()))
        #expect(m.requestBody() == .drop)
        #expect(m.requestEnd() == .drop)
        #expect(m.isIdle)
        // A refusal whose framing is suspect closes.
        #expect(m.begin(Self.get, .answer(close: true)) == .answer)
        #expect(m.localResponseHead(status: .badRequest, error: "two Host headers") == .writeHead(.asIs, close: true))
        #expect(m.responseEnd() == .writeEnd(close: true, done: false, releaseUpstream: false, End(error: "two Host headers")))
    }

    @Test func aDropRuleHangsUpAndEndsTheRowAtOnce() {
        var m = Machine()
        #expect(m.begin(Self.get, .hangUp(error: "dropped by the rule \"x\"")) == .hangUp(End(error: "dropped by the rule \"x\"")))
        #expect(m.clientClosed("gone") == .abandon(nil))
    }

    @Test func aConnectIsRoutedAtItsEndAndHasNoRow() {
        var m = Machine()
        #expect(m.begin(Self.get, .connect) == .awaitConnectEnd)
        #expect(!m.rowOpen)
        #expect(m.requestEnd() == .routeConnect)
        #expect(m.isIdle)
    }

    @Test func theServerAnsweringBeforeTheRequestEndedReleasesItsConnection() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestBody()
        _ = m.responseHead(status: .payloadTooLarge, hasContentLength: true, isChunked: false)
        #expect(m.responseEnd() == .writeEnd(close: false, done: false, releaseUpstream: true, End()))
        // The rest of the body is read and dropped, then the exchange is over.
        #expect(m.requestBody() == .drop)
        #expect(m.requestEnd() == .drop)
        #expect(m.isIdle)
    }

    @Test func anUpstreamThatFailsBeforeAnsweringGetsAnErrorAnswerInItsRow() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestEnd()
        // The request was read whole: an error answer, and the connection stays.
        #expect(m.upstreamFailed("refused") == .answerError(close: false))
        #expect(m.localResponseHead(status: .badGateway, error: "refused") == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false, End(error: "refused")))
        // Mid-request: the rest cannot be read past safely, so it closes.
        _ = m.begin(Self.get, .forward)
        _ = m.requestBody()
        #expect(m.upstreamFailed("refused") == .answerError(close: true))
        #expect(m.requestBody() == .drop)
    }

    @Test func anUpstreamThatResetsMidResponseClosesTheClientAndEndsTheRow() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestBody()
        _ = m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false)
        _ = m.responseBody()
        #expect(m.upstreamFailed("reset") == .closeMidResponse(End(error: "reset")))
        // What the client still sends is dropped.
        #expect(m.requestBody() == .drop)
        // After the end, a server closing its kept-alive connection is nothing.
        var done = Machine()
        _ = done.begin(Self.get, .forward)
        _ = done.requestEnd()
        _ = done.responseHead(status: Self.ok, hasContentLength: true, isChunked: false)
        _ = done.responseEnd()
        #expect(done.upstreamFailed("closed") == .ignore)
    }

    @Test func aClientThatLeavesMidBodyEndsTheRowOnce() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestBody()
        #expect(m.clientClosed("left") == .abandon(End(error: "left")))
        #expect(m.clientClosed("left") == .abandon(nil))
        var idle = Machine()
        #expect(idle.clientClosed("left") == .abandon(nil))
    }

    @Test func aHalfCloseWhileIdleClosesAndMidExchangeClosesAfterTheAnswer() {
        var m = Machine()
        #expect(m.clientInputClosed() == .closeFinished)
        var busy = Machine()
        _ = busy.begin(Self.get, .forward)
        _ = busy.requestEnd()
        #expect(busy.clientInputClosed() == .closeAfterResponse)
        #expect(busy.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: true))
        #expect(busy.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false, End()))
        // A held request goes nowhere: close now (the close ends the row).
        var held = Machine()
        _ = held.begin(Self.get, .hold)
        _ = held.requestEnd()
        #expect(held.clientInputClosed() == .close(nil))
    }

    @Test func aStalledBodyTimesOutAndTheRestIsDropped() {
        var m = Machine()
        _ = m.begin(Self.get, .forward)
        _ = m.requestBody()
        #expect(m.clientTimedOut("stalled") == .abandon(End(error: "stalled")))
        #expect(m.requestBody() == .drop)
    }

    @Test func eventsTheHandlerCannotSendInThisStateAreIllegal() {
        var m = Machine()
        guard case .illegal = m.requestBody() else {
            Issue.record("a body part with no request")
            return
        }
        guard case .illegal = m.requestEnd() else {
            Issue.record("an end with no request")
            return
        }
        guard case .illegal = m.heldRequestReleased() else {
            Issue.record("a release with nothing held")
            return
        }
        guard case .illegal = m.heldResponseReleased(status: Self.ok, hasContentLength: true, isChunked: false) else {
            Issue.record("a response release with nothing held")
            return
        }
        guard case .illegal = m.requestDecided(.forward) else {
            Issue.record("a verdict with no head")
            return
        }
        _ = m.begin(Self.get, .forward)
        // A second head while one is under way is not taken.
        guard case .illegal = m.requestHead(Self.get) else {
            Issue.record("a second head")
            return
        }
        _ = m.requestEnd()
        guard case .illegal = m.requestBody() else {
            Issue.record("a body part after the end")
            return
        }
    }

    @Test func responsePartsNoExchangeWaitsForAreTheUpstreamsFault() {
        var m = Machine()
        #expect(m.responseHead(status: Self.ok, hasContentLength: true, isChunked: false) == .unexpected)
        #expect(m.responseBody() == .unexpected)
        #expect(m.responseEnd() == .unexpected)
        #expect(m.upstreamFailed("closed") == .ignore)
    }
}

extension StreamStateMachine {
    /// A head opened and decided: the decision's action.
    mutating func begin(_ info: Request, _ verdict: Verdict) -> DecisionAction {
        guard requestHead(info) == .openExchange else { return .illegal("not idle") }
        return requestDecided(verdict)
    }
}
