import NIOCore
import NIOEmbedded
import Testing

@testable import ProxyEngine

/// Many deadlines behind one check, on an `EmbeddedEventLoop` whose clock the test moves.
@Suite struct DeadlineGroupTests {
    final class Fired { var ids: [Int] = [] }

    @Test func eachFiresOnceAtItsOwnDeadline() {
        let loop = EmbeddedEventLoop()
        let group = DeadlineGroup(eventLoop: loop)
        let fired = Fired()
        let (a, b, c) = (group.makeID(), group.makeID(), group.makeID())
        group.set(a, at: loop.now + .seconds(5)) { fired.ids.append(a) }
        loop.advanceTime(by: .seconds(2))
        group.set(b, at: loop.now + .seconds(5)) { fired.ids.append(b) }
        group.set(c, at: loop.now + .seconds(1)) { fired.ids.append(c) }
        loop.advanceTime(by: .seconds(1))
        #expect(fired.ids == [c], "the nearer deadline set later re-arms the check")
        loop.advanceTime(by: .seconds(2))
        #expect(fired.ids == [c, a])
        loop.advanceTime(by: .seconds(1))
        #expect(fired.ids == [c, a])
        loop.advanceTime(by: .seconds(1))
        #expect(fired.ids == [c, a, b], "the check re-arms for what is left")
        loop.advanceTime(by: .seconds(60))
        #expect(fired.ids == [c, a, b] && group.count == 0)
    }

    @Test func clearedOnesDoNotFireAndMovedOnesFireAtTheNewTime() {
        let loop = EmbeddedEventLoop()
        let group = DeadlineGroup(eventLoop: loop)
        let fired = Fired()
        let (a, b) = (group.makeID(), group.makeID())
        group.set(a, at: loop.now + .seconds(3)) { fired.ids.append(a) }
        group.set(b, at: loop.now + .seconds(3)) { fired.ids.append(b) }
        group.clear(a)
        loop.advanceTime(by: .seconds(2))
        // Each request moves its deadline later: the check at 3 s finds it and looks again.
        group.set(b, at: loop.now + .seconds(3)) { fired.ids.append(b) }
        loop.advanceTime(by: .seconds(2))
        #expect(fired.ids.isEmpty && group.count == 1)
        loop.advanceTime(by: .seconds(1))
        #expect(fired.ids == [b] && group.count == 0)
        // A name may be set again after it fired or was cleared.
        group.set(a, at: loop.now + .seconds(1)) { fired.ids.append(a) }
        loop.advanceTime(by: .seconds(1))
        #expect(fired.ids == [b, a])
    }
}
