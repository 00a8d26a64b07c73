// swift-tools-version:6.1
import Foundation
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The web page's files (Sources/WebFront/Page), each served at `/NAME`.
enum WebPage {
    static let files = [
        "index.html", "login.html", "login.js", "app.css", "favicon.svg",
        // The page's ES modules: index.html loads main.js, which imports the rest.
        "main.js", "store.js", "api.js", "dom.js", "util.js",
        "list.js", "rows.js", "virtuallist.js", "paging.js", "live.js", "selection.js", "sort.js", "keyboard.js", "splitter.js",
        "filter.js", "highlight.js", "filterhelp.js",
        "detail.js", "detailbody.js", "detailinfo.js", "hexview.js", "jsonview.js", "grpcview.js", "messages.js",
        "held.js", "compose.js", "sessions.js", "theme.js", "auth.js",
        "views.js", "router.js", "statusbar.js", "statusfeed.js", "statusview.js", "readiness.js",
        "devices.js", "devicesteps.js", "enrol.js",
        "settings.js", "settingsform.js", "settingsrules.js", "settingscards.js",
    ]
}

/// The commit compiled into `--version`: BUSYMATE_COMMIT (the Makefile
/// exports HEAD's), else the checkout's HEAD read from .git (SwiftPM may keep
/// an earlier evaluation of this file, so that can be an older commit's),
/// else "unknown".
enum BuildCommit {
    static var value: String {
        if let given = Context.environment["BUSYMATE_COMMIT"], !given.isEmpty { return clean(given) }
        let git = Context.packageDirectory + "/.git/"
        guard let head = read(git + "HEAD") else { return "unknown" }
        guard head.hasPrefix("ref: ") else { return clean(String(head.prefix(7))) }
        let ref = String(head.dropFirst(5))
        if let hash = read(git + ref) { return clean(String(hash.prefix(7))) }
        let packed = read(git + "packed-refs") ?? ""
        for line in packed.split(separator: "\n") where line.hasSuffix(" " + ref) { return clean(String(line.prefix(7))) }
        return "unknown"
    }

    static func read(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Only what a C string literal can hold as is.
    static func clean(_ text: String) -> String {
        String(text.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.+~".contains($0)) }.prefix(40))
    }
}

let package = Package(
    name: "Busymate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "busymate-app", targets: ["busymate-app"]),
        .executable(name: "busymate-tunnel", targets: ["busymate-tunnel"]),
        .executable(name: "busymate-web", targets: ["busymate-web"]),
        .executable(name: "busymate", targets: ["busymate"]),
        // For the fuzz harnesses (fuzz/) and the benchmark (bench/), packages
        // of their own that depend on this one by path.
        .library(name: "BusymateShared", targets: ["BusymateShared"]),
        .library(name: "CaptureStore", targets: ["CaptureStore"]),
        .library(name: "ProxyEngine", targets: ["ProxyEngine"]),
        .library(name: "ProxyClient", targets: ["ProxyClient"]),
        .library(name: "Tunnel", targets: ["Tunnel"]),
        .library(name: "WebFront", targets: ["WebFront"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Without its default traits: no swift-configuration.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlidec", providers: [.apt(["libbrotli-dev"])]),
        .target(name: "CLinux", cSettings: [.define("BUSYMATE_COMMIT", to: "\"\(BuildCommit.value)\"")]),
        .target(
            name: "BusymateShared",
            dependencies: [
                "CSystemd",
                "CLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        .target(
            name: "CaptureStore",
            dependencies: [
                "BusymateShared",
                "CBrotli",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .target(
            name: "ProxyEngine",
            dependencies: [
                "BusymateShared",
                "CaptureStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict),
        // The cloud: pairing's claim, the sink to PostgREST, Realtime.
        .target(
            name: "Cloud",
            dependencies: [
                "BusymateShared",
                "CLinux",
                "CaptureStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            ],
            swiftSettings: strict),
        .target(
            name: "Tunnel",
            dependencies: [
                "BusymateShared",
                "CaptureStore",
                "Cloud",
                "ProxyEngine",
                "ProxyClient",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        .target(
            name: "ProxyClient",
            dependencies: [
                "BusymateShared",
                "CaptureStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            swiftSettings: strict),
        .target(
            name: "Supervisor",
            dependencies: [
                "BusymateShared",
                "CLinux",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        .target(
            name: "WebFront",
            dependencies: [
                "BusymateShared",
                "CaptureStore",
                "ProxyClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The page's own files, compiled into the binary: nothing to install beside it.
            resources: WebPage.files.map { .embedInCode("Page/\($0)") },
            swiftSettings: strict),
        .target(
            name: "BusymateCLI",
            dependencies: [
                "BusymateShared",
                "CaptureStore",
                "ProxyClient",
                "Cloud",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict),
        .executableTarget(name: "busymate-app", dependencies: ["Supervisor"], swiftSettings: strict),
        .executableTarget(name: "busymate-tunnel", dependencies: ["BusymateShared", "Cloud", "Tunnel"], swiftSettings: strict),
        .executableTarget(name: "busymate-web", dependencies: ["BusymateShared", "WebFront"], swiftSettings: strict),
        .executableTarget(name: "busymate", dependencies: ["BusymateCLI"], swiftSettings: strict),
        .testTarget(
            name: "CloudTests",
            dependencies: ["Cloud", "CaptureStore", "BusymateShared", .product(name: "NIOHTTP1", package: "swift-nio")],
            swiftSettings: strict),
        .testTarget(
            name: "BusymateSharedTests",
            dependencies: ["BusymateShared"],
            swiftSettings: strict),
        .testTarget(
            name: "ProxyEngineTests",
            dependencies: [
                "ProxyEngine",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "CompressNIO", package: "compress-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "TunnelTests",
            dependencies: ["Tunnel", "ProxyEngine", "CaptureStore", "BusymateShared"],
            swiftSettings: strict),
        .testTarget(
            name: "CaptureStoreTests",
            dependencies: ["CaptureStore", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict),
        .testTarget(
            name: "SupervisorTests",
            dependencies: [
                "Supervisor",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WebFrontTests",
            dependencies: [
                "WebFront",
                "ProxyClient",
                "CaptureStore",
                "BusymateShared",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "CompressNIO", package: "compress-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "BusymateShared",
                // Command.run spawns with posix_spawn (busymate_spawn), not Foundation's Process.
                "CLinux",
                // A store made in a test for the CLI to read (rows the data path cannot make yet).
                "CaptureStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict),
    ]
)
