import BusymateShared
import CaptureStore
import Foundation
import ProxyEngine

/// What the data path spends per message on breakpoints, in this process:
/// with none set (the check the streaming path makes), and with patterns
/// that do not match the URL. Timed over many messages, so the figure does
/// not depend on the machine's drift the way a throughput cell does.
enum BreakpointCheckBench {
    struct Result {
        var noneNanoseconds: Double
        var unmatchedNanoseconds: Double
    }

    static func run(in directory: URL) throws -> Result {
        let root = directory.appendingPathComponent("check-group")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        // A real store: without one the controller never matches at all.
        let controller = BreakpointController(
            store: StoreHandle(try CaptureDatabase(paths: GroupPaths(root: root))),
            notifier: nil, groupPath: root.path)
        let url = "https://localhost:8443/1k"
        var settings = AppSettings()
        controller.apply(settings)
        let none = time(10_000_000) { controller.isEmpty ? 0 : (controller.holds(.request, url, exchange: nil) ? 1 : 0) }
        settings.breakpoints.request = [URLPattern("elsewhere.test/*")].compactMap { $0 }.map(RuleMatch.url)
        settings.breakpoints.response = [URLPattern("elsewhere.test/*")].compactMap { $0 }.map(RuleMatch.url)
        controller.apply(settings)
        let unmatched = time(1_000_000) { controller.isEmpty ? 0 : (controller.holds(.request, url, exchange: nil) ? 1 : 0) }
        return Result(noneNanoseconds: none, unmatchedNanoseconds: unmatched)
    }

    /// Nanoseconds per call of `check`, whose results are summed so the calls stay.
    private static func time(_ count: Int, _ check: () -> Int) -> Double {
        var sum = 0
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<count { sum &+= check() }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
        if sum == Int.min { FileHandle.standardError.write(Data("\(sum)".utf8)) }
        return elapsed / Double(count)
    }
}
