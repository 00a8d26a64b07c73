import NIOHTTP1
import Testing
@testable import ProxyEngine

/// The exchange state machine alone: each case a sequence of events and the
/// actions it must give, no channel involved.
@Suite struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine
    static let get = Machine.Request()
    static let head = Machine.Request(isHead: true)
    static let closing = Machine.Request(keepAlive: false)
    static let http10 = Machine.Request(keepAlive: false, isHTTP10: true)
    static let upgrade = Machine.Request(upgrade: true)

    @Test func aKeptAliveExchangeForwardsEachPartAndEndsIdle() {
        var m = Machine()
        #expect(m.requestHead(Self.get, verdict: .forward) == .forwardHead)
        #expect(m.requestBody() == .forwardBody)
        #expect(m.requestEnd() == .forwardEnd)
        #expect(m.requestForwarded() == .none)
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .writeBody)
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
        #expect(m.isIdle)
        // The next request on the same connection starts afresh.
        #expect(m.requestHead(Self.get, verdict: .forward) == .forwardHead)
    }

    @Test func aClientThatAsksToCloseGetsConnectionCloseAndAClose() {
        var m = Machine()
        _ = m.requestHead(Self.closing, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: true))
        #expect(m.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false))
    }

    @Test func headAnd204And304AreBodylessWhateverTheirHeadersSay() {
        var m = Machine()
        _ = m.requestHead(Self.head, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.bodyless, close: false))
        // A body after a HEAD's answer is never passed on.
        #expect(m.responseBody() == .none)
        _ = m.responseEnd()
        for status in [HTTPResponseStatus.noContent, .notModified] {
            _ = m.requestHead(Self.get, verdict: .forward)
            _ = m.requestEnd()
            #expect(m.responseHead(status: status, hasContentLength: false, isChunked: true) == .writeHead(.bodyless, close: false))
            #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
        }
    }

    @Test func aCloseDelimitedResponseIsChunkedFor11AndClosedFor10() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .ok, hasContentLength: false, isChunked: false) == .writeHead(.chunked, close: false))
        _ = m.responseEnd()
        _ = m.requestHead(Self.http10, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .ok, hasContentLength: false, isChunked: false) == .writeHead(.closeDelimited, close: true))
        #expect(m.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false))
    }

    @Test func continueAndOther1xxGoOutAndTheRealAnswerFollows() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        // Expect: 100-continue: the server says go before the body is sent.
        #expect(m.responseHead(status: .continue, hasContentLength: false, isChunked: false) == .writeInformational)
        #expect(m.requestBody() == .forwardBody)
        #expect(m.requestEnd() == .forwardEnd)
        #expect(m.responseHead(status: .custom(code: 103, reasonPhrase: "Early Hints"), hasContentLength: false, isChunked: false) == .writeInformational)
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
    }

    @Test func a101SwitchesOnceBothHalvesHaveEnded() {
        var m = Machine()
        _ = m.requestHead(Self.upgrade, verdict: .forward)
        #expect(m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false) == .writeHead(.bodyless, close: false))
        // The response ends before the request: wait for it.
        #expect(m.responseEnd() == .none)
        #expect(m.requestEnd() == .forwardEnd)
        #expect(m.requestForwarded() == .switchProtocols)
        #expect(m.isIdle)
        // The other order.
        _ = m.requestHead(Self.upgrade, verdict: .forward)
        _ = m.requestEnd()
        _ = m.requestForwarded()
        _ = m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false)
        #expect(m.responseEnd() == .switchProtocols)
    }

    @Test func a101NobodyAskedForIsAProtocolError() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .switchingProtocols, hasContentLength: false, isChunked: false) == .protocolError)
    }

    @Test func aHeldRequestIsReadWholeThenForwardedWhenReleased() {
        var m = Machine()
        #expect(m.requestHead(Self.get, verdict: .hold) == .none)
        #expect(m.requestBody() == .holdPart)
        #expect(m.requestEnd() == .pauseRequest)
        // Nothing more is read into it while the breakpoint decides.
        #expect(m.requestBody() == .none)
        #expect(m.heldRequestReleased() == .forwardHead)
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
    }

    @Test func aHeldRequestCanBeAnsweredByTheProxyOrGoOnUnheldWhenTooLarge() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .hold)
        _ = m.requestEnd()
        #expect(m.heldRequestAnswered(close: false) == .answer)
        #expect(m.responseHead(status: .badGateway, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
        _ = m.requestHead(Self.get, verdict: .hold)
        #expect(m.requestBody() == .holdPart)
        #expect(m.heldRequestOverflowed() == .forwardHead)
        #expect(m.requestBody() == .forwardBody)
        #expect(m.requestEnd() == .forwardEnd)
    }

    @Test func aHeldResponseIsReadWholeThenWrittenWhenReleased() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false, hold: true) == .none)
        #expect(m.responseBody() == .holdPart)
        #expect(m.responseEnd() == .pauseResponse)
        // The server closing now changes nothing: the response is read whole.
        #expect(m.upstreamFailed() == .none)
        #expect(m.heldResponseReleased(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .writeBody)
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
    }

    @Test func aBlockOrLocalAnswerDropsTheRestOfTheRequest() {
        var m = Machine()
        #expect(m.requestHead(Self.get, verdict: .answer(close: false)) == .answer)
        #expect(m.responseHead(status: .forbidden, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseBody() == .writeBody)
        // Answered before the request ended: not done until its end is read.
        #expect(m.responseEnd() == .writeEnd(close: false, done: false, releaseUpstream: false))
        #expect(m.requestBody() == .none)
        #expect(m.requestEnd() == .none)
        #expect(m.isIdle)
        // A refusal whose framing is suspect closes.
        #expect(m.requestHead(Self.get, verdict: .answer(close: true)) == .answer)
        #expect(m.responseHead(status: .badRequest, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: true))
        #expect(m.requestHead(Self.get, verdict: .forward) == .none)
    }

    @Test func aDropRuleHangsUp() {
        var m = Machine()
        #expect(m.requestHead(Self.get, verdict: .hangUp) == .hangUp)
    }

    @Test func aConnectIsRoutedAtItsEnd() {
        var m = Machine()
        #expect(m.requestHead(Self.get, verdict: .connect) == .none)
        #expect(m.requestEnd() == .routeConnect)
        #expect(m.isIdle)
    }

    @Test func theServerAnsweringBeforeTheRequestEndedReleasesItsConnection() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestBody()
        _ = m.responseHead(status: .payloadTooLarge, hasContentLength: true, isChunked: false)
        #expect(m.responseEnd() == .writeEnd(close: false, done: false, releaseUpstream: true))
        // The rest of the body is read and dropped, then the exchange is over.
        #expect(m.requestBody() == .none)
        #expect(m.requestEnd() == .none)
        #expect(m.isIdle)
    }

    @Test func anUpstreamThatFailsBeforeAnswering() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        // The request was read whole: an error answer, and the connection stays.
        #expect(m.upstreamFailed() == .answerError(close: false))
        #expect(m.responseHead(status: .badGateway, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: false))
        #expect(m.responseEnd() == .writeEnd(close: false, done: true, releaseUpstream: false))
        // Mid-request: the rest cannot be read past safely, so it closes.
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestBody()
        #expect(m.upstreamFailed() == .answerError(close: true))
        #expect(m.requestBody() == .none)
    }

    @Test func anUpstreamThatResetsMidResponseClosesTheClient() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        _ = m.responseHead(status: .ok, hasContentLength: true, isChunked: false)
        _ = m.responseBody()
        #expect(m.upstreamFailed() == .closeMidResponse)
        #expect(m.isIdle)
        // After the end, a server closing its kept-alive connection is nothing.
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestEnd()
        _ = m.responseHead(status: .ok, hasContentLength: true, isChunked: false)
        _ = m.responseEnd()
        #expect(m.upstreamFailed() == .none)
    }

    @Test func aClientThatLeavesMidBodyAbandonsTheExchange() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestBody()
        #expect(m.clientClosed() == .close(abandoned: true))
        var idle = Machine()
        #expect(idle.clientClosed() == .close(abandoned: false))
    }

    @Test func aHalfCloseWhileIdleClosesAndMidExchangeClosesAfterTheAnswer() {
        var m = Machine()
        #expect(m.clientInputClosed() == .close(abandoned: false))
        var busy = Machine()
        _ = busy.requestHead(Self.get, verdict: .forward)
        _ = busy.requestEnd()
        #expect(busy.clientInputClosed() == .none)
        #expect(busy.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .writeHead(.asIs, close: true))
        #expect(busy.responseEnd() == .writeEnd(close: true, done: true, releaseUpstream: false))
    }

    @Test func aStalledBodyTimesOutAndTheRestIsDropped() {
        var m = Machine()
        _ = m.requestHead(Self.get, verdict: .forward)
        _ = m.requestBody()
        #expect(m.clientTimedOut() == .close(abandoned: true))
        #expect(m.requestBody() == .none)
    }

    @Test func eventsOutOfTurnAreIgnored() {
        var m = Machine()
        #expect(m.requestBody() == .none)
        #expect(m.requestEnd() == .none)
        #expect(m.responseHead(status: .ok, hasContentLength: true, isChunked: false) == .none)
        #expect(m.responseBody() == .none)
        #expect(m.responseEnd() == .none)
        #expect(m.heldRequestReleased() == .none)
        #expect(m.heldResponseReleased(status: .ok, hasContentLength: true, isChunked: false) == .none)
        #expect(m.upstreamFailed() == .none)
        _ = m.requestHead(Self.get, verdict: .forward)
        // A second head while one is under way is not taken.
        #expect(m.requestHead(Self.get, verdict: .forward) == .none)
    }
}
