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
    /// NIO's HTTP/2 client on an origin connection that chose `h2`.
    static func http2Connection(_ channel: Channel, hello: TLSHello?, services: ProxyServices) throws -> (UpstreamHTTP2Pool.Connection, settled: EventLoopFuture<Void>) {
        let handler = NIOHTTP2Handler(mode: .client, eventLoop: channel.eventLoop, connectionConfiguration: HTTP2Limits.clientConnection,
                                      streamConfiguration: HTTP2Limits.stream) { pushed in
            // Push is off (SETTINGS_ENABLE_PUSH 0): a pushed stream is refused.
            pushed.close()
        }
        let settled = channel.eventLoop.makePromise(of: Void.self)
        // An origin that breaks the protocol gets its GOAWAY and is let go: the streams on it fail now, not at their timeout.
        let closer = HTTP2ConnectionErrorCloser(logger: services.logger, client: true)
        try channel.pipeline.syncOperations.addHandlers([FlushCoalescer(), closer, handler, RemoteSettingsWatcher(promise: settled),
                                                         HTTP2ConnectionErrorCloser.Stalled(logger: services.logger, closer: closer)])
        let connection = UpstreamHTTP2Pool.Connection(channel: channel, multiplexer: try handler.syncMultiplexer(), hello: hello,
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
                    try? connection.channel.pipeline.syncOperations.addHandler(OriginGoawayWatcher { last in
                        // A later GOAWAY only lowers it (RFC 9113 §6.8).
                        connection.goaway.value = min(connection.goaway.value ?? last, last)
                        forget.value.forget(key, connection, lastStreamID: last)
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
        let layer = UpstreamLayer(handler: UpstreamHandler(side: self))
        let bound = NIOLoopBound((self, layer), eventLoop: eventLoop)
        let secure = key.secure
        connection.multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture { try bound.value.1.install(onStream: stream, secure: secure) }
        }.whenComplete { result in
            let (side, layer) = bound.value
            side.streamOpened(result, key: key, layer: layer, connection: connection, fresh: fresh)
        }
    }

    func streamOpened(_ result: Result<Channel, Error>, key: Key, layer: UpstreamLayer, connection: UpstreamHTTP2Pool.Connection, fresh: Bool) {
        guard case let .connecting(current, pending) = state, current == key, delegate != nil else {
            if case let .success(stream) = result { stream.close(promise: nil) }
            return
        }
        switch result {
        case let .success(stream) where connection.goaway.value != nil:
            // The origin's GOAWAY came while the stream was being opened (a
            // server shutting down sends it with its first SETTINGS): nothing
            // went on it, so it goes on a new connection, once.
            stream.close(promise: nil)
            guard !retriedStream, let pool = pooledDial?.pool else {
                state = .none
                report(.closed(key.target, OriginRefusedStream(bodyAlreadySent: false)))
                return
            }
            retriedStream = true
            pool.forget(key, connection)
            askPool()
        case let .success(stream):
            if !fresh {
                hello = connection.hello
                report(.connected(server: connection.channel.remoteAddress))
                if key.secure { report(.tls(connection.hello, doneAt: nil)) }
            }
            state = .connected(key, stream, layer)
            for part in pending { stream.write(part, promise: nil) }
            stream.flush()
            // Its id is known once its first frame has gone (or waits behind the origin's stream limit).
            retry.opened(on: connection, id: try? stream.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID))
            if let pool = pooledDial?.pool {
                let bound = NIOLoopBound(self, eventLoop: eventLoop)
                pool.whenGoaway(connection, for: self) { last in bound.value.originWentAway(last) }
            }
            if pending.contains(where: { if case .end = $0 { true } else { false } }) { startTimer() }
            report(.ready)
        case .failure where (!fresh || connection.goaway.value != nil) && !retriedStream && pooledDial != nil:
            // The origin's connection takes no new stream (it sent GOAWAY, perhaps with its first SETTINGS): once, a connection anew.
            retriedStream = true
            pooledDial?.pool.forget(key, connection)
            askPool()
        case let .failure(error):
            dialFailed(Self.dialFailure(key.target, error))
        }
    }

    // MARK: streams the origin did not process

    /// The origin retired the connection this exchange's stream is on: a
    /// stream it will not process (above `last`, or still waiting behind its
    /// stream limit) is closed here and sent again on a new connection.
    func originWentAway(_ last: HTTP2StreamID) {
        guard case let .connected(_, stream, layer) = state, layer.isStream, !retry.responseBegun else { return }
        if let id = retry.streamID, id <= last { return }
        retry.refusedByGoaway = true
        stream.close(promise: nil)
    }

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

    func stopWatchingGoaway() {
        if let connection = retry.connection { pooledDial?.pool.stopWatching(connection, for: self) }
    }
}
