import Foundation

/// The page's files, compiled in (Package.swift, `WebPage.files`).
enum PageAssets {
    struct Asset: Sendable {
        var bytes: [UInt8]
        var type: String
    }

    static let all: [String: Asset] = [
        "/index.html": Asset(bytes: PackageResources.index_html, type: html),
        "/login.html": Asset(bytes: PackageResources.login_html, type: html),
        "/login.js": Asset(bytes: PackageResources.login_js, type: javascript),
        "/app.css": Asset(bytes: PackageResources.app_css, type: "text/css; charset=utf-8"),
        "/favicon.svg": Asset(bytes: PackageResources.favicon_svg, type: "image/svg+xml"),
        "/util.js": Asset(bytes: PackageResources.util_js, type: javascript),
        "/jsonview.js": Asset(bytes: PackageResources.jsonview_js, type: javascript),
        "/grpcview.js": Asset(bytes: PackageResources.grpcview_js, type: javascript),
        "/virtuallist.js": Asset(bytes: PackageResources.virtuallist_js, type: javascript),
        "/detail.js": Asset(bytes: PackageResources.detail_js, type: javascript),
        "/messages.js": Asset(bytes: PackageResources.messages_js, type: javascript),
        "/settings.js": Asset(bytes: PackageResources.settings_js, type: javascript),
        "/app.js": Asset(bytes: PackageResources.app_js, type: javascript),
    ]

    static let html = "text/html; charset=utf-8"
    static let javascript = "text/javascript; charset=utf-8"

    /// What the login page shows before there is a session: nothing in them is secret.
    static let forLogin: Set<String> = ["/login", "/login.js", "/app.css", "/favicon.svg"]
}
