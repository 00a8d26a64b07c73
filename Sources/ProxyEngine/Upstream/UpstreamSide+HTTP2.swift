import BusymateShared
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import NIOTLS

/// Streams on an origin's HTTP/2 connection: opened once its SETTINGS
/// have come, and sent again on a new connection when the origin did not
/// process them.
extension UpstreamSide {
    /// NIO's HTTP/2 client on an origin connection that chose `h2`, at the
    /// frame level: `OriginStreams` carries the exchanges' streams.
    static func http2Connection(_ channel: Channel, hello: TLSHello?, services: ProxyServices) throws -> (
        UpstreamHTTP2Pool.Connection, settled: EventLoopFuture<Void>
    ) {
        // Push is off (SETTINGS_ENABLE_PUSH 0): NIO treats a PUSH_PROMISE as the origin's protocol error.
        let handler = NIOHTTP2Handler(
            mode: .client, connectionConfiguration: HTTP2Limits.clientConnection, streamConfiguration: HTTP2Limits.stream)
        let streams = OriginStreams()
        let settled = channel.eventLoop.makePromise(of: Void.self)
        // An origin that breaks the protocol gets its GOAWAY and is let go: the streams on it fail now, not at their timeout.
        let closer = HTTP2ConnectionErrorCloser(logger: services.logger, client: true)
        try channel.pipeline.syncOperations.addHandlers([
            FlushCoalescer(), closer, handler, streams, RemoteSettingsWatcher(promise: settled),
            HTTP2ConnectionErrorCloser.Stalled(logger: services.logger, closer: closer),
        ])
        let connection = UpstreamHTTP2Pool.Connection(
            channel: channel, streams: NIOLoopBound(streams, eventLoop: channel.eventLoop), hello: hello,
            goaway: NIOLoopBoundBox(nil, eventLoop: channel.eventLoop))
        return (connection, settled.futureResult)
    }

    /// Streams go on a new origin HTTP/2 connection once its SETTINGS have
    /// come (its stream limit known); the pool's waiters with them.
    func whenSettled(_ settled: EventLoopFuture<Void>, _ connection: UpstreamHTTP2Pool.Connection, key: Key, pool: UpstreamHTTP2Pool?) {
        let bound = NIOLoopBound((self, pool), eventLoop: connection.channel.eventLoop)
        settled.whenComplete { result in
            let (side, pool) = bound.value
            switch result {
            case .success:
                if let pool {
                    let forget = NIOLoopBound(pool, eventLoop: connection.channel.eventLoop)
                    try? connection.channel.pipeline.syncOperations.addHandler(
                        OriginGoawayWatcher { last in
                            // A later GOAWAY only lowers it (RFC 9113 §6.8).
                            connection.goaway.value = min(connection.goaway.value ?? last, last)
                            forget.value.forget(key, connection)
                        })
                }
                pool?.dialled(key, .success(connection))
                side.openStream(on: connection, key: key, fresh: true)
            case let .failure(error):
                connection.channel.close(promise: nil)
                pool?.dialled(key, .failure(error))
                guard case let .connecting(current, _) = side.state, current == key else { return }
                side.dialFailed(Self.dialFailure(key.target, error))
            }
        }
    }

    /// Opens this exchange's stream on an origin HTTP/2 connection; the
    /// parts queued meanwhile go on it. `fresh`: this exchange dialled it.
    func openStream(on connection: UpstreamHTTP2Pool.Connection, key: Key, fresh: Bool) {
        guard case let .connecting(current, pending) = state, current == key, delegate != nil else { return }
        guard connection.goaway.value == nil, let stream = connection.streams.value.open(secure: key.secure, delegate: self) else {
            // The connection takes no new stream (the origin sent GOAWAY, perhaps
            // with its first SETTINGS, or it closed): nothing went on it, so
            // the exchange goes on a new connection, once.
            guard !retriedStream, let pool = pooledDial?.pool else {
                if connection.goaway.value != nil {
                    state = .none
                    report(.closed(key.target, OriginRefusedStream(bodyAlreadySent: false)))
                } else {
                    dialFailed(Self.dialFailure(key.target, ChannelError.ioOnClosedChannel))
                }
                return
            }
            retriedStream = true
            pool.forget(key, connection)
            askPool()
            return
        }
        if !fresh {
            hello = connection.hello
            report(.connected(server: connection.channel.remoteAddress))
            if key.secure { report(.tls(connection.hello, doneAt: nil)) }
        }
        state = .streaming(key, stream)
        retry.opened(on: connection)
        for part in pending { stream.write(part) }
        stream.flush()
        if pending.contains(where: { if case .end = $0 { true } else { false } }) { startTimer() }
        report(.ready)
    }

    // MARK: streams the origin did not process

    func retryOrReport(_ key: Key, _ error: Error?) {
        guard case .connecting(key, _) = state else { return }
        guard retry.wasRefused(error) else {
            state = .none
            report(.closed(key.target, error))
            return
        }
        guard retry.replayable, !retry.retried, let connection = retry.connection, let pool = pooledDial?.pool else {
            state = .none
            report(.closed(key.target, OriginRefusedStream(bodyAlreadySent: !retry.replayable)))
            return
        }
        services.logger.debug("the origin did not process a stream; sending it again", metadata: ["TARGET": "\(key.target)"])
        // Only a GOAWAY retires the connection: a stream refused on its own (REFUSED_STREAM) goes again on it.
        if connection.goaway.value != nil { pool.forget(key, connection) }
        state = .connecting(key, pending: retry.parts)
        retry.retrying()
        askPool()
    }
}

extension UpstreamSide: OriginStreamDelegate {
    private func isCurrent(_ stream: OriginStream) -> Bool {
        if case let .streaming(_, current) = state { current === stream } else { false }
    }

    func originStream(_ stream: OriginStream, received part: HTTPClientResponsePart) {
        guard isCurrent(stream) else { return }
        if case .head = part { retry.responseHead() }
        report(.response(part))
    }

    func originStreamReadComplete(_ stream: OriginStream) {
        if isCurrent(stream) { report(.readComplete) }
    }

    func originStreamWritable(_ stream: OriginStream) {
        if isCurrent(stream) { report(.ready) }
    }

    func originStream(_ stream: OriginStream, closed error: Error?) {
        guard case let .streaming(key, current) = state, current === stream else { return }
        stopTimer()
        if pooledDial != nil, retry.mayHaveBeenRefused(error) {
            // Decided on the next tick, out of the connection's GOAWAY handling; the client waits meanwhile.
            state = .connecting(key, pending: [])
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            eventLoop.execute { bound.value.retryOrReport(key, error) }
            return
        }
        state = .none
        report(.closed(key.target, error))
    }
}
