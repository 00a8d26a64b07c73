// swift-tools-version:6.1
// The benchmark generator (`make bench`): a package of its own beside the
// project, as fuzz/ is, so that the project's `swift build` (and `make run`'s
// first build) never compiles it. It depends on the project by path and is
// run from the top directory (it reads bench/limits.md and starts
// bench/cloud-double.py from there).
import PackageDescription

let package = Package(
    name: "BusymateBench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Busymate", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        .executableTarget(
            name: "busymate-bench",
            dependencies: [
                .product(name: "BusymateShared", package: "Busymate"),
                .product(name: "CaptureStore", package: "Busymate"),
                .product(name: "ProxyClient", package: "Busymate"),
                .product(name: "ProxyEngine", package: "Busymate"),
                .product(name: "WebFront", package: "Busymate"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
