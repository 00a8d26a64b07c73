// swift-tools-version:6.1
// Busymate's libFuzzer harnesses: one executable per subject. A package of
// its own, so the root package's `swift build` never sees them. Built by
// scripts/fuzz.sh (`make fuzz`) with `--sanitize=fuzzer` and
// `-enable-testing` (the harnesses `@testable import` the library targets
// so they call the very functions the tunnel calls, internal ones included).
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// One harness: `fuzz-<subject>`, its corpus in corpus/<subject>/.
func harness(_ subject: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: "fuzz-\(subject)", dependencies: ["FuzzSupport"] + dependencies, swiftSettings: strict)
}

let package = Package(
    name: "BusymateFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Busymate", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .target(name: "FuzzSupport", dependencies: [.product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        harness(
            "http1",
            [
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "BusymateShared", package: "Busymate"),
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        harness(
            "tls-hello",
            [
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        harness(
            "settings",
            [
                .product(name: "BusymateShared", package: "Busymate"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        harness("url-pattern", [.product(name: "BusymateShared", package: "Busymate")]),
        harness(
            "raw-http",
            [
                .product(name: "BusymateShared", package: "Busymate"),
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),
        harness("notification", [.product(name: "BusymateShared", package: "Busymate")]),
        harness("control-message", [.product(name: "BusymateShared", package: "Busymate")]),
        harness("dns", [.product(name: "ProxyEngine", package: "Busymate")]),
        harness(
            "filter",
            [
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "BusymateShared", package: "Busymate"),
            ]),
        harness(
            "grpc",
            [
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "BusymateShared", package: "Busymate"),
            ]),
        harness(
            "socks5",
            [
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        harness(
            "websocket",
            [
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        harness(
            "http2",
            [
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
    ]
)
