import NIOCore
import NIOHTTP1
import Testing

@testable import ProxyEngine

/// The HTTP/1 connection's own state as events and actions, on a clock the
/// test moves: clocks, pipelining, drain and half-close, without a channel.
struct HTTP1ConnectionStateMachineTests {
    typealias M = HTTP1ConnectionStateMachine
    static let clocks = M.Clocks(head: .seconds(10), body: .seconds(20), idle: .seconds(60), drain: .seconds(2))
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    func at(_ seconds: Int64) -> NIODeadline { t0 + .seconds(seconds) }

    let head = M.Inbound.part(.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/")))
    let body = M.Inbound.part(.body(ByteBuffer(string: "x")))
    let end = M.Inbound.part(.end(nil))

    func started() -> M {
        var m = M(clocks: Self.clocks)
        m.connectionStarted(now: t0)
        return m
    }

    @Test func aNewConnectionMustSendItsHeadInTimeOrIsClosedWithoutAWord() {
        var m = started()
        #expect(m.deadline?.timer == .head)
        #expect(m.deadline?.at == at(10))
        #expect(m.timerFired(now: at(9)) == .notYet)
        #expect(m.timerFired(now: at(10)) == .closeQuietly(.head))
    }

    @Test func aHeadThatDripsIsAnswered408FromItsFirstByte() {
        var m = started()
        m.bytesArrived(now: at(5))
        // Later bytes of the same head do not move its clock.
        m.bytesArrived(now: at(9))
        #expect(m.deadline?.at == at(15))
        #expect(m.timerFired(now: at(15)) == .answer408(.head))
        // Closing: nothing more goes up.
        #expect(m.inbound(head, now: at(16)) == .drop)
    }

    @Test func aBodyMovesItsClockWithEachPieceAndWaitingForTheAnswerStopsIt() {
        var m = started()
        #expect(m.inbound(head, now: at(1)) == .deliver)
        #expect(m.deadline?.timer == .body)
        #expect(m.inbound(body, now: at(5)) == .deliver)
        #expect(m.deadline?.at == at(25))
        #expect(m.inbound(end, now: at(6)) == .deliver)
        #expect(m.deadline == nil)
        #expect(m.responseHead(.ok) == .write)
        #expect(m.responseEnd(now: at(100)) == .write)
        #expect(m.deadline?.timer == .idle)
        #expect(m.deadline?.at == at(160))
        #expect(m.timerFired(now: at(160)) == .closeQuietly(.idle))
    }

    @Test func aBodyThatStallsAfterTheAnswerBeganIsCutNotAnswered() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.responseHead(.payloadTooLarge)
        #expect(m.timerFired(now: at(21)) == .close(.body))
    }

    @Test func aPipelinedRequestWaitsForTheAnswerAndTheSocketIsNotReadMeanwhile() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        // The next request is decoded from the same read: it waits.
        #expect(m.inbound(head, now: at(1)) == .wait)
        #expect(m.inbound(end, now: at(1)) == .wait)
        #expect(m.read() == false)
        #expect(m.nextWaiting(now: at(2)) == nil)
        _ = m.responseHead(.ok)
        #expect(m.responseEnd(now: at(3)) == .write)
        // Now it goes up, whole, and still no read until it too is answered.
        #expect(m.nextWaiting(now: at(3))?.1 == .deliver)
        #expect(m.nextWaiting(now: at(3))?.1 == .deliver)
        #expect(m.nextWaiting(now: at(3)) == nil)
        #expect(m.takeReadPending() == false)
        _ = m.responseHead(.ok)
        _ = m.responseEnd(now: at(4))
        #expect(m.takeReadPending() == true)
        #expect(m.read() == true)
    }

    static func request(_ method: HTTPMethod, _ headers: HTTPHeaders = [:]) -> M.Inbound {
        .part(.head(HTTPRequestHead(version: .http1_1, method: method, uri: "/", headers: headers)))
    }

    /// NIO's decoder parses nothing after a CONNECT or an upgrade request
    /// (llhttp's rule), whatever the answer: one that declines it is the
    /// connection's last, or the client's next request would hang.
    @Test(arguments: [
        (Self.request(.GET, ["Upgrade": "websocket", "Connection": "keep-alive, Upgrade"]), HTTPResponseStatus.forbidden),
        (Self.request(.GET, ["Upgrade": "h2c", "Connection": "Upgrade, HTTP2-Settings"]), .ok),
        (Self.request(.GET, ["upgrade": "websocket", "connection": "keep-alive", "CONNECTION": "upgrade"]), .notFound),
        (Self.request(.GET, ["Upgrade": "websocket", "Proxy-Connection": "Upgrade"]), .forbidden),
        (Self.request(.CONNECT), .badGateway),
        // A CONNECT the proxy takes leaves this layer before its answer; one
        // that reaches here went to an origin, whose 2xx leaves nothing here.
        (Self.request(.CONNECT), .ok),
    ])
    func aDeclinedUpgradeOrCONNECTIsTheLastExchange(request: M.Inbound, status: HTTPResponseStatus) {
        var m = started()
        _ = m.inbound(request, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.responseHead(status) == .writeSayingClose)
        #expect(m.responseEnd(now: at(2)) == .writeThenClose)
        #expect(m.read() == false)
        #expect(m.inbound(head, now: at(3)) == .drop)
    }

    @Test func anUpgradeTakenOrAnUpgradeHeaderAloneKeepsTheConnection() {
        var m = started()
        _ = m.inbound(Self.request(.GET, ["Upgrade": "websocket", "Connection": "Upgrade"]), now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.responseHead(.switchingProtocols) == .write)
        #expect(m.responseEnd(now: at(2)) == .write)
        // An Upgrade header without the token in Connection is only an offer: llhttp parses on.
        var n = started()
        _ = n.inbound(Self.request(.GET, ["Upgrade": "h2c"]), now: at(1))
        _ = n.inbound(end, now: at(1))
        #expect(n.responseHead(.ok) == .write)
        #expect(n.responseEnd(now: at(2)) == .write)
        #expect(n.takeReadPending() == false)
        #expect(n.read() == true)
    }

    /// Declined before the request ended (an early answer): the request's end
    /// is still read, then the connection closes.
    @Test func anUpgradeDeclinedBeforeItsRequestEndedClosesWhenTheRequestEnds() {
        var m = started()
        _ = m.inbound(Self.request(.POST, ["Upgrade": "h2c", "Connection": "Upgrade, HTTP2-Settings"]), now: at(1))
        #expect(m.responseHead(.forbidden) == .writeSayingClose)
        #expect(m.responseEnd(now: at(2)) == .write)
        #expect(m.inbound(body, now: at(3)) == .deliver)
        #expect(m.inbound(end, now: at(3)) == .deliverThenClose)
        #expect(m.inbound(head, now: at(4)) == .drop)
    }

    /// Bytes the decoder refused behind an exchange under way: that exchange
    /// is answered first, then the refusal.
    @Test func refusedBytesBehindAnExchangeWaitForItsAnswer() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.inbound(.malformed(.invalidMethod), now: at(1)) == .wait)
        #expect(m.refusedBytes)
        _ = m.responseHead(.ok)
        _ = m.responseEnd(now: at(2))
        #expect(m.nextWaiting(now: at(2))?.1 == .refuse(.invalidMethod, answer: true, recordRow: true))
        #expect(m.read() == false)
    }

    @Test func noClientClockRunsWhileAResponseIsAwaitedAndAPipelinedHeadsClockStartsAfterIt() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        // The next head's first bytes arrive while the first is answered.
        m.bytesArrived(now: at(2))
        #expect(m.deadline == nil)
        _ = m.responseHead(.ok)
        _ = m.responseEnd(now: at(30))
        #expect(m.deadline?.timer == .head)
        #expect(m.deadline?.at == at(40))
    }

    @Test func drainingAnIdleConnectionGivesItOneMoreRequestToldItIsTheLast() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        _ = m.responseHead(.ok)
        _ = m.responseEnd(now: at(2))
        m.quiesce(now: at(3))
        #expect(m.deadline?.timer == .drain)
        #expect(m.inbound(head, now: at(4)) == .deliver)
        #expect(m.inbound(end, now: at(4)) == .deliver)
        #expect(m.responseHead(.ok) == .writeSayingClose)
        #expect(m.responseEnd(now: at(5)) == .writeThenClose)
    }

    @Test func drainingASilentConnectionClosesItAfterTheDrainWait() {
        var m = started()
        m.quiesce(now: at(1))
        #expect(m.timerFired(now: at(2)) == .notYet)
        #expect(m.timerFired(now: at(3)) == .closeQuietly(.drain))
    }

    @Test func drainingWhileAnAnswerIsAwaitedMakesThatAnswerTheLastAndDropsWhatIsPipelinedBehindIt() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.inbound(head, now: at(1)) == .wait)
        m.quiesce(now: at(2))
        #expect(m.responseHead(.ok) == .writeSayingClose)
        #expect(m.responseEnd(now: at(3)) == .writeThenClose)
        #expect(m.nextWaiting(now: at(3)) == nil)
    }

    @Test func drainingAfterTheHeadWentOutLetsThePipelinedRequestBeTheLast() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.responseHead(.ok) == .write)
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        m.quiesce(now: at(2))
        #expect(m.responseEnd(now: at(3)) == .write)
        #expect(m.nextWaiting(now: at(3))?.1 == .deliver)
        #expect(m.nextWaiting(now: at(3))?.1 == .deliver)
        #expect(m.responseHead(.ok) == .writeSayingClose)
        #expect(m.responseEnd(now: at(4)) == .writeThenClose)
    }

    @Test func aHalfClosedClientIsAnsweredThenClosedAndAnIdleOneAtOnce() {
        var busy = started()
        _ = busy.inbound(head, now: at(1))
        _ = busy.inbound(end, now: at(1))
        #expect(busy.inbound(.inputClosed, now: at(1)) == .inputClosed(closeNow: false))
        #expect(busy.responseHead(.ok) == .writeSayingClose)
        #expect(busy.responseEnd(now: at(2)) == .writeThenClose)

        var idle = started()
        #expect(idle.inbound(.inputClosed, now: at(1)) == .inputClosed(closeNow: true))
    }

    @Test func aHalfCloseBehindPipelinedRequestsWaitsItsTurn() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.inbound(head, now: at(1)) == .wait)
        #expect(m.inbound(end, now: at(1)) == .wait)
        #expect(m.inbound(.inputClosed, now: at(1)) == .wait)
        _ = m.responseHead(.ok)
        #expect(m.responseEnd(now: at(2)) == .write)
        #expect(m.nextWaiting(now: at(2))?.1 == .deliver)
        #expect(m.nextWaiting(now: at(2))?.1 == .deliver)
        // The second request is under way: the half-close goes up at once, so its answer is the last.
        #expect(m.nextWaiting(now: at(2))?.1 == .inputClosed(closeNow: false))
        #expect(m.responseHead(.ok) == .writeSayingClose)
        #expect(m.responseEnd(now: at(3)) == .writeThenClose)
    }

    @Test func theEndOfInputMidHeadBehindARequestWaitsAndTheRequestIsAnsweredFirst() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.inbound(.malformed(.invalidEOFState), now: at(1)) == .wait)
        #expect(m.inbound(.inputClosed, now: at(1)) == .wait)
        _ = m.responseHead(.ok)
        #expect(m.responseEnd(now: at(2)) == .write)
        // Nobody's head: dropped; the half-close closes.
        #expect(m.nextWaiting(now: at(2))?.1 == .drop)
        #expect(m.nextWaiting(now: at(2))?.1 == .inputClosed(closeNow: true))
    }

    @Test func anUpgradedConnectionIsNotClosedByADrainOrAHalfClose() {
        var m = started()
        _ = m.inbound(.part(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/ws"))), now: at(1))
        _ = m.inbound(end, now: at(1))
        m.quiesce(now: at(2))
        #expect(m.inbound(.inputClosed, now: at(2)) == .inputClosed(closeNow: false))
        #expect(m.responseHead(.switchingProtocols) == .write)
        #expect(m.responseEnd(now: at(3)) == .write)
    }

    @Test func aMalformedRequestIsAnsweredAndRecordedHereOnlyWhenNoExchangeHasIt() {
        var fresh = started()
        #expect(fresh.inbound(.malformed(.invalidMethod), now: at(1)) == .refuse(.invalidMethod, answer: true, recordRow: true))
        #expect(fresh.inbound(head, now: at(1)) == .drop)

        // A body that stops parsing mid-request: the exchange handler's row; answered, as no response began.
        var midBody = started()
        _ = midBody.inbound(head, now: at(1))
        #expect(midBody.inbound(.malformed(.invalidChunkSize), now: at(1)) == .refuse(.invalidChunkSize, answer: true, recordRow: false))

        // Once a response has begun, nothing more can be said.
        var answering = started()
        _ = answering.inbound(head, now: at(1))
        _ = answering.responseHead(.ok)
        #expect(answering.inbound(.malformed(.invalidChunkSize), now: at(1)) == .refuse(.invalidChunkSize, answer: false, recordRow: false))

        // Malformed bytes pipelined behind a request wait for its answer, then are refused.
        var pipelined = started()
        _ = pipelined.inbound(head, now: at(1))
        _ = pipelined.inbound(end, now: at(1))
        #expect(pipelined.inbound(.malformed(.invalidMethod), now: at(1)) == .wait)
        _ = pipelined.responseHead(.ok)
        _ = pipelined.responseEnd(now: at(2))
        #expect(pipelined.nextWaiting(now: at(2))?.1 == .refuse(.invalidMethod, answer: true, recordRow: true))

        // The connection ending mid-message is not this layer's to answer.
        var cut = started()
        _ = cut.inbound(head, now: at(1))
        #expect(cut.inbound(.malformed(.invalidEOFState), now: at(1)) == .passOn)
    }

    @Test func leavingHTTPStopsTheClocksAndHandsOnWhatWaited() {
        var m = started()
        _ = m.inbound(.part(.head(HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: "example.com:443"))), now: at(1))
        #expect(m.deadline == nil)
        _ = m.inbound(end, now: at(1))
        m.bytesArrived(now: at(2))
        #expect(m.deadline == nil)
        #expect(m.inbound(head, now: at(2)) == .wait)
        #expect(m.read() == false)
        let (waiting, read) = m.leave()
        #expect(waiting == [head])
        #expect(read)
    }

    @Test func a101StopsTheClocks() {
        var m = started()
        _ = m.inbound(.part(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/ws"))), now: at(1))
        _ = m.inbound(end, now: at(1))
        #expect(m.responseHead(.switchingProtocols) == .write)
        #expect(m.deadline == nil)
        m.bytesArrived(now: at(2))
        #expect(m.deadline == nil)
    }

    @Test func anEarlyAnswerLetsTheRestOfTheRequestBeReadAndAStalledRestIsCutQuietly() {
        var m = started()
        _ = m.inbound(head, now: at(1))
        _ = m.responseHead(.forbidden)
        #expect(m.responseEnd(now: at(2)) == .write)
        // The request's rest still goes up to be discarded, and the next request may follow.
        #expect(m.inbound(body, now: at(3)) == .deliver)
        #expect(m.read() == true)
        #expect(m.timerFired(now: at(23)) == .close(.body))
    }
}
