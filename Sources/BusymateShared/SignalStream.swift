import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// Signals as an async sequence (the default action is switched off).
public enum SignalStream {
    public static func make(_ signals: [Int32]) -> AsyncStream<Int32> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "busymate.signals")
        let sources = signals.map { sig -> DispatchSourceSignal in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { continuation.yield(sig) }
            source.resume()
            return source
        }
        let box = SourcesBox(sources)
        continuation.onTermination = { _ in box.cancel() }
        return stream
    }

    private final class SourcesBox: @unchecked Sendable {
        // Only touched on creation and termination.
        let sources: [DispatchSourceSignal]
        init(_ sources: [DispatchSourceSignal]) { self.sources = sources }
        func cancel() { sources.forEach { $0.cancel() } }
    }
}
