import NIOCore
import NIOHTTP2

/// The origin connections one HTTP/2 client connection's streams share:
/// one HTTP/2 connection per destination, dialled by the first stream that
/// needs it while the others wait, each stream of ours a stream of its.
/// A destination that answered with HTTP/1.1 is remembered, so later
/// streams go to it over HTTP/1.1 at once, each taking a finished
/// connection another stream left (`park`) or dialling one. Confined to
/// the client connection's event loop.
final class UpstreamHTTP2Pool {
    typealias Key = UpstreamSide.Key

    /// An origin HTTP/2 connection and what its handshake said.
    struct Connection {
        let channel: Channel
        let streams: NIOLoopBound<OriginStreams>
        let hello: TLSHello?
        /// The last stream id of the origin's GOAWAY, once it sent one. Bound
        /// to the origin connection's loop, which is its client's: the
        /// connector dials on the client connection's loop.
        let goaway: NIOLoopBoundBox<HTTP2StreamID?>
    }

    /// What a stream that asked gets: a connection to open its stream on,
    /// nil (dial HTTP/1.1 yourself), or the dial's failure.
    typealias Waiter = (Result<Connection?, Error>) -> Void

    private enum Entry {
        case dialling([Waiter])
        case ready(Connection)
        case http1Only
    }

    private var entries: [Key: Entry] = [:]
    private var closed = false
    /// Connections the origin retired (GOAWAY): their open streams finish; closed with the client's.
    private var retired: [ObjectIdentifier: Channel] = [:]

    /// A finished HTTP/1.1 origin connection, kept for the client's next stream.
    struct Parked {
        let channel: Channel
        let layer: UpstreamLayer
        let hello: TLSHello?
    }

    /// At most this many idle HTTP/1.1 connections per destination (browsers open six).
    static let parkedPerDestination = 6
    private var parked: [Key: [Parked]] = [:]
    /// Parked connections whose close is watched.
    private var watched: Set<ObjectIdentifier> = []

    func park(_ key: Key, _ connection: Parked) {
        guard !closed, connection.channel.isActive, parked[key, default: []].count < Self.parkedPerDestination else {
            connection.channel.close(promise: nil)
            return
        }
        parked[key, default: []].append(connection)
        let channel = connection.channel
        // Once per connection, however often it is parked.
        guard watched.insert(ObjectIdentifier(channel)).inserted else { return }
        channel.closeFuture.hop(to: channel.eventLoop).assumeIsolated().whenComplete { [weak self] _ in
            self?.parked[key]?.removeAll { $0.channel === channel }
            self?.watched.remove(ObjectIdentifier(channel))
        }
    }

    func takeParked(_ key: Key) -> Parked? {
        while let next = parked[key]?.popLast() {
            if next.channel.isActive { return next }
        }
        return nil
    }

    enum Lookup {
        /// Open a stream on it.
        case ready(Connection)
        /// Another stream is dialling: the waiter is called when it is done.
        case queued
        /// Dial, offering h2; report with `dialled`.
        case dial
        /// The origin speaks HTTP/1.1 only: dial that.
        case http1
    }

    func lookup(_ key: Key, waiter: @escaping Waiter) -> Lookup {
        dropEagerUnless(key)
        switch entries[key] {
        case let .ready(connection) where connection.channel.isActive:
            return .ready(connection)
        case var .dialling(waiters):
            waiters.append(waiter)
            entries[key] = .dialling(waiters)
            return .queued
        case .http1Only:
            return .http1
        case .ready, nil:
            entries[key] = .dialling([])
            return .dial
        }
    }

    /// The dial `lookup` asked for has ended: an HTTP/2 connection, HTTP/1.1 (nil), or a failure.
    func dialled(_ key: Key, _ result: Result<Connection?, Error>) {
        // The client connection closed while this dial went on: nobody will use what it made.
        if closed, case let .success(connection?) = result {
            connection.channel.close(promise: nil)
            return
        }
        guard case let .dialling(waiters) = entries[key] else { return }
        switch result {
        case let .success(connection?) where !closed:
            entries[key] = .ready(connection)
            let channel = connection.channel
            channel.closeFuture.hop(to: channel.eventLoop).assumeIsolated().whenComplete { [weak self] _ in
                guard let self, case let .ready(current) = self.entries[key], current.channel === channel else { return }
                self.entries[key] = nil
            }
        case let .success(connection?):
            connection.channel.close(promise: nil)
        case .success(nil):
            entries[key] = .http1Only
        case .failure:
            entries[key] = nil
        }
        for waiter in waiters { waiter(result) }
    }

    /// A connection that takes no new stream (the origin sent GOAWAY): the
    /// next stream dials anew, and it is closed once none of ours is left on
    /// it (those the origin will not process were refused by its
    /// `OriginStreams`, and go elsewhere).
    func forget(_ key: Key, _ connection: Connection) {
        let channel = connection.channel
        let id = ObjectIdentifier(channel)
        if case let .ready(current) = entries[key], current.channel === channel { entries[key] = nil }
        guard retired[id] == nil, channel.isActive, !closed else { return }
        guard !connection.streams.value.isEmpty else {
            channel.close(promise: nil)
            return
        }
        retired[id] = channel
        channel.closeFuture.hop(to: channel.eventLoop).assumeIsolated().whenComplete { [weak self] _ in
            self?.retired[id] = nil
        }
        connection.streams.value.onDrained = { channel.close(promise: nil) }
    }

    // MARK: eager ALPN

    /// The origin connection dialled before the client's handshake, until the first stream asks.
    private var eager: (key: Key, channel: Channel)?
    /// It, until its SETTINGS come, unless it was dropped.
    private var eagerSettling: Channel?

    /// The origin connection dialled before the client's handshake, which
    /// chose `h2`: the streams wait for its SETTINGS as for a dial of theirs.
    func adoptEager(_ key: Key, _ connection: Connection, settled: EventLoopFuture<Void>) {
        let channel = connection.channel
        guard !closed, entries[key] == nil else {
            channel.close(promise: nil)
            return
        }
        entries[key] = .dialling([])
        eager = (key, channel)
        eagerSettling = channel
        settled.hop(to: channel.eventLoop).assumeIsolated().whenComplete { [weak self] result in
            // Not wanted meanwhile (the first stream went elsewhere, or the client left).
            guard let self, self.eagerSettling === channel else {
                channel.close(promise: nil)
                return
            }
            self.eagerSettling = nil
            switch result {
            case .success:
                try? channel.pipeline.syncOperations.addHandler(
                    OriginGoawayWatcher { [weak self] last in
                        connection.goaway.value = min(connection.goaway.value ?? last, last)
                        self?.forget(key, connection)
                    })
                self.dialled(key, .success(connection))
            case let .failure(error):
                channel.close(promise: nil)
                self.dialled(key, .failure(error))
            }
        }
    }

    /// The origin chose HTTP/1.1 for a client that offered `h2` alone: its
    /// streams go over HTTP/1.1, the first on this connection.
    func adoptEager(_ key: Key, parked connection: Parked) {
        guard !closed, entries[key] == nil else {
            connection.channel.close(promise: nil)
            return
        }
        entries[key] = .http1Only
        park(key, connection)
    }

    /// The first stream asks for `key`: one that goes elsewhere leaves the eager connection unused, closed.
    private func dropEagerUnless(_ key: Key) {
        guard let (eagerKey, channel) = eager else { return }
        eager = nil
        guard eagerKey != key else { return }
        if eagerSettling === channel { eagerSettling = nil }
        if case .dialling(let waiters) = entries[eagerKey], waiters.isEmpty { entries[eagerKey] = nil }
        if case let .ready(connection) = entries[eagerKey], connection.channel === channel { entries[eagerKey] = nil }
        channel.close(promise: nil)
    }

    /// The client connection has closed: its origin connections go too.
    func closeAll() {
        closed = true
        eager?.channel.close(promise: nil)
        eager = nil
        for case let .ready(connection) in entries.values { connection.channel.close(promise: nil) }
        for connection in parked.values.joined() { connection.channel.close(promise: nil) }
        for channel in retired.values { channel.close(promise: nil) }
        entries = [:]
        parked = [:]
        retired = [:]
    }
}
