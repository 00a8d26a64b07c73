import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What every harness shares: the way libFuzzer's input is handed over,
/// and the way a broken property is reported (a crash, for which libFuzzer
/// keeps the input).
///
/// A harness is an executable whose `LLVMFuzzerTestOneInput` calls
/// `Fuzz.input`; `swift build --sanitize=fuzzer` compiles it as a library
/// (`-parse-as-library`), so libFuzzer's own `main` runs it.
public enum Fuzz {
    nonisolated(unsafe) private static var silenced = false

    /// Runs `body` on one input. The first call silences logging first.
    public static func input(_ data: UnsafePointer<UInt8>?, _ size: Int, _ body: (UnsafeRawBufferPointer) -> Void) -> Int32 {
        silenceLogs()
        body(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }

    /// The code under test logs what it refuses; at thousands of inputs a
    /// second that is noise, unless FUZZ_LOG is set. Loggers made before
    /// this keep logging: harnesses make theirs lazily, after it.
    public static func silenceLogs() {
        guard !silenced else { return }
        silenced = true
        if getenv("FUZZ_LOG") == nil { LoggingSystem.bootstrap { _ in SwiftLogNoOpLogHandler() } }
    }

    /// A property of the code under test does not hold: says which on
    /// stderr and aborts, so libFuzzer reports a crash and keeps the input.
    public static func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        guard !condition else { return }
        let text = Array("FUZZ PROPERTY FAILED at \(file):\(line): \(message())\n".utf8)
        _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        abort()
    }

    /// Text for a message: non-printable bytes escaped.
    public static func show<S: StringProtocol>(_ text: S) -> String {
        text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? String($0) : "\\u{\(String($0.value, radix: 16))}" }
            .joined()
    }
}
