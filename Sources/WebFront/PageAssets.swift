import Foundation

/// The page's files, compiled in (Package.swift, `WebPage.files`).
enum PageAssets {
    struct Asset: Sendable {
        var bytes: [UInt8]
        var type: String
    }

    static let all: [String: Asset] = [
        "/index.html": Asset(bytes: PackageResources.index_html, type: "text/html; charset=utf-8"),
        "/login.html": Asset(bytes: PackageResources.login_html, type: "text/html; charset=utf-8"),
        "/app.css": Asset(bytes: PackageResources.app_css, type: "text/css; charset=utf-8"),
        "/app.js": Asset(bytes: PackageResources.app_js, type: "text/javascript; charset=utf-8"),
        "/favicon.svg": Asset(bytes: PackageResources.favicon_svg, type: "image/svg+xml"),
    ]
}
