import NIOCore
import NIOEmbedded
import Testing

@testable import ProxyEngine

/// The one-check deadline on an `EmbeddedEventLoop`, whose clock the test moves.
@Suite struct MovingDeadlineTests {
    final class Fired { var count = 0 }

    private func make() -> (EmbeddedEventLoop, MovingDeadline, Fired) {
        let loop = EmbeddedEventLoop()
        let fired = Fired()
        return (loop, MovingDeadline { fired.count += 1 }, fired)
    }

    @Test func itFiresOnceAtItsDeadline() {
        let (loop, deadline, fired) = make()
        deadline.set(after: .seconds(5), on: loop)
        loop.advanceTime(by: .seconds(4))
        #expect(fired.count == 0)
        loop.advanceTime(by: .seconds(1))
        #expect(fired.count == 1)
        loop.advanceTime(by: .seconds(60))
        #expect(fired.count == 1)
    }

    @Test func movedLaterItFiresAtTheNewDeadlineNotTheOld() {
        let (loop, deadline, fired) = make()
        deadline.set(after: .seconds(5), on: loop)
        loop.advanceTime(by: .seconds(3))
        // Each request moves it: the first check finds it later and looks again.
        deadline.set(after: .seconds(5), on: loop)
        loop.advanceTime(by: .seconds(2))
        #expect(fired.count == 0)
        loop.advanceTime(by: .seconds(3))
        #expect(fired.count == 1)
    }

    @Test func movedNearerItFiresAtTheNearerDeadline() {
        let (loop, deadline, fired) = make()
        deadline.set(after: .seconds(60), on: loop)
        deadline.set(after: .seconds(2), on: loop)
        loop.advanceTime(by: .seconds(2))
        #expect(fired.count == 1)
        loop.advanceTime(by: .seconds(60))
        #expect(fired.count == 1)
    }

    @Test func clearedOrCancelledItDoesNotFire() {
        let (loop, deadline, fired) = make()
        deadline.set(after: .seconds(1), on: loop)
        deadline.clear()
        loop.advanceTime(by: .seconds(2))
        #expect(fired.count == 0)
        deadline.set(after: .seconds(1), on: loop)
        deadline.cancel()
        loop.advanceTime(by: .seconds(2))
        #expect(fired.count == 0)
        // And it can be set again after either.
        deadline.set(after: .seconds(1), on: loop)
        loop.advanceTime(by: .seconds(1))
        #expect(fired.count == 1)
    }
}
