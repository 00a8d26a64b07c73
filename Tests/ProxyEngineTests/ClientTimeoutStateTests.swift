@testable import ProxyEngine
import Testing

/// The client-side clocks as events and actions, without a channel.
struct ClientTimeoutStateTests {
    typealias S = ClientTimeoutState

    @Test func aNewConnectionMustSendItsHeadInTime() {
        var s = S()
        #expect(s.connectionStarted() == .start(.head))
        // Silence: closed without an answer (nothing was asked).
        #expect(s.fired(.head) == .closeQuietly)
    }

    @Test func aHeadThatDripsIsAnswered408() {
        var s = S()
        _ = s.connectionStarted()
        // The first byte keeps the head clock that is already running.
        #expect(s.bytesArrived() == .start(.head))
        #expect(s.bytesArrived() == .none)
        #expect(s.fired(.head) == .answer408(.head))
    }

    @Test func aBodyRestartsItsClockWithEachPieceAndWaitingForTheAnswerStopsIt() {
        var s = S()
        _ = s.connectionStarted()
        _ = s.bytesArrived()
        #expect(s.requestHead() == .start(.body))
        #expect(s.requestBody() == .start(.body))
        #expect(s.requestBody() == .start(.body))
        #expect(s.requestEnd() == .stop)
        #expect(s.running == nil)
        #expect(s.responseHead() == .none)
        #expect(s.responseEnd() == .start(.idle))
        #expect(s.fired(.idle) == .closeQuietly)
    }

    @Test func aBodyThatStallsAfterTheAnswerBeganIsCutNotAnswered() {
        var s = S()
        _ = s.connectionStarted()
        _ = s.bytesArrived()
        _ = s.requestHead()
        _ = s.responseHead()
        #expect(s.fired(.body) == .close(.body))
    }

    @Test func noClientClockRunsWhileAResponseIsAwaitedEvenWithAPipelinedHead() {
        var s = S()
        _ = s.connectionStarted()
        _ = s.bytesArrived()
        _ = s.requestHead()
        _ = s.requestEnd()
        // The next request's bytes come while the first is being answered.
        #expect(s.bytesArrived() == .none)
        #expect(s.running == nil)
        // Its head clock starts once the first answer is out.
        #expect(s.responseEnd() == .start(.head))
    }

    @Test func aStaleTimerDoesNothing() {
        var s = S()
        _ = s.connectionStarted()
        _ = s.bytesArrived()
        _ = s.requestHead()
        // The head timer was replaced by the body timer: its firing is nothing.
        #expect(s.fired(.head) == .ignore)
        #expect(s.running == .body)
    }

    @Test func leavingHTTPStopsEverythingForGood() {
        var s = S()
        _ = s.connectionStarted()
        _ = s.bytesArrived()
        #expect(s.leftHTTP() == .stop)
        #expect(s.bytesArrived() == .none)
        #expect(s.requestHead() == .none)
        #expect(s.responseEnd() == .none)
        #expect(s.running == nil)
    }
}
