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
        // The page's ES modules (index.html loads /main.js; it imports the rest).
        "/main.js": Asset(bytes: PackageResources.main_js, type: javascript),
        "/store.js": Asset(bytes: PackageResources.store_js, type: javascript),
        "/api.js": Asset(bytes: PackageResources.api_js, type: javascript),
        "/dom.js": Asset(bytes: PackageResources.dom_js, type: javascript),
        "/util.js": Asset(bytes: PackageResources.util_js, type: javascript),
        "/list.js": Asset(bytes: PackageResources.list_js, type: javascript),
        "/rows.js": Asset(bytes: PackageResources.rows_js, type: javascript),
        "/virtuallist.js": Asset(bytes: PackageResources.virtuallist_js, type: javascript),
        "/paging.js": Asset(bytes: PackageResources.paging_js, type: javascript),
        "/live.js": Asset(bytes: PackageResources.live_js, type: javascript),
        "/selection.js": Asset(bytes: PackageResources.selection_js, type: javascript),
        "/sort.js": Asset(bytes: PackageResources.sort_js, type: javascript),
        "/keyboard.js": Asset(bytes: PackageResources.keyboard_js, type: javascript),
        "/splitter.js": Asset(bytes: PackageResources.splitter_js, type: javascript),
        "/filter.js": Asset(bytes: PackageResources.filter_js, type: javascript),
        "/highlight.js": Asset(bytes: PackageResources.highlight_js, type: javascript),
        "/filterhelp.js": Asset(bytes: PackageResources.filterhelp_js, type: javascript),
        "/detail.js": Asset(bytes: PackageResources.detail_js, type: javascript),
        "/detailbody.js": Asset(bytes: PackageResources.detailbody_js, type: javascript),
        "/detailinfo.js": Asset(bytes: PackageResources.detailinfo_js, type: javascript),
        "/hexview.js": Asset(bytes: PackageResources.hexview_js, type: javascript),
        "/jsonview.js": Asset(bytes: PackageResources.jsonview_js, type: javascript),
        "/grpcview.js": Asset(bytes: PackageResources.grpcview_js, type: javascript),
        "/messages.js": Asset(bytes: PackageResources.messages_js, type: javascript),
        "/held.js": Asset(bytes: PackageResources.held_js, type: javascript),
        "/compose.js": Asset(bytes: PackageResources.compose_js, type: javascript),
        "/sessions.js": Asset(bytes: PackageResources.sessions_js, type: javascript),
        "/theme.js": Asset(bytes: PackageResources.theme_js, type: javascript),
        "/auth.js": Asset(bytes: PackageResources.auth_js, type: javascript),
        "/views.js": Asset(bytes: PackageResources.views_js, type: javascript),
        "/router.js": Asset(bytes: PackageResources.router_js, type: javascript),
        "/statusbar.js": Asset(bytes: PackageResources.statusbar_js, type: javascript),
        "/statusfeed.js": Asset(bytes: PackageResources.statusfeed_js, type: javascript),
        "/statusview.js": Asset(bytes: PackageResources.statusview_js, type: javascript),
        "/readiness.js": Asset(bytes: PackageResources.readiness_js, type: javascript),
        "/devices.js": Asset(bytes: PackageResources.devices_js, type: javascript),
        "/devicesteps.js": Asset(bytes: PackageResources.devicesteps_js, type: javascript),
        "/enrol.js": Asset(bytes: PackageResources.enrol_js, type: javascript),
        "/settings.js": Asset(bytes: PackageResources.settings_js, type: javascript),
        "/settingsform.js": Asset(bytes: PackageResources.settingsform_js, type: javascript),
        "/settingsrules.js": Asset(bytes: PackageResources.settingsrules_js, type: javascript),
        "/settingscards.js": Asset(bytes: PackageResources.settingscards_js, type: javascript),
    ]

    static let html = "text/html; charset=utf-8"
    static let javascript = "text/javascript; charset=utf-8"

    /// What the login page shows before there is a session: nothing in them is secret.
    static let forLogin: Set<String> = ["/login", "/login.js", "/app.css", "/favicon.svg"]
}
