import BusymateShared
import Foundation

/// The pages an enrolment link leads to: the device's own setup page, with
/// its readiness (reloaded every few seconds, no script), or why the link
/// was refused.
enum EnrolmentPage {
    struct Step {
        var label: String
        var ok: Bool
        var detail: String
    }

    /// The readiness of `row` as the device sees it, in the order it gets there.
    static func steps(_ row: DeviceRow?, now: Date = Date()) -> [Step] {
        let time = { (date: Date) in ISO8601DateFormatter().string(from: date) }
        let count = { (n: Int) in n == 1 ? "once" : "\(n) times" }
        guard let row else { return [] }
        return [
            Step(label: "Enrolled", ok: row.enrolledAt != nil, detail: row.enrolment ?? "no link"),
            Step(
                label: "Admitted", ok: row.admittedUntil != nil,
                detail: row.admittedUntil.map { "until \(time($0)), renewed while it sends traffic" } ?? "not admitted"),
            Step(
                label: "PAC fetched", ok: row.pacFetches > 0, detail: row.pacFetches > 0 ? count(row.pacFetches) : "set the PAC URL below"),
            Step(
                label: "CA downloaded", ok: row.caDownloads > 0, detail: row.caDownloads > 0 ? count(row.caDownloads) : "download it below"),
            Step(
                label: "CA trusted", ok: row.caTrustedAt != nil,
                detail: row.caTrustedAt.map { "an intercepted HTTPS handshake completed \(time($0))" }
                    ?? "no intercepted HTTPS handshake yet: install and trust the CA, then open an HTTPS page"),
            Step(
                label: "Traffic seen", ok: row.lastSeen != nil,
                detail: row.lastSeen.map { "last \(time($0))\(row.source.map { " (\($0))" } ?? "")\(row.online ? ", online" : "")" }
                    ?? "none yet"),
        ]
    }

    static func device(name: String, pacURL: String, caURL: String, derURL: String, proxy: String?, row: DeviceRow?, pacRefused: String?)
        -> String
    {
        let e = OnboardingPage.escape
        let pac = e(pacURL)
        let list = steps(row).map { step in
            "<li class=\"\(step.ok ? "ok" : "todo")\" data-step=\"\(e(step.label))\"><b>\(step.ok ? "✓" : "✗") \(e(step.label))</b> <span class=note>\(e(step.detail))</span></li>"
        }.joined()
        let qr = (try? QRCode.encode(pacURL, correction: .medium).svg(quietZone: 4, label: "QR code of \(pacURL)")) ?? ""
        let pacCard =
            pacRefused.map { "<div class=\"card warn\"><h2>No proxy for this address yet</h2><p>\(e($0)).</p></div>" }
            ?? "<div class=\"card pac\">\(qr)<div><h2>This device's PAC URL</h2><p><code>\(pac)</code></p>"
            + "<p class=note>It sends this device's traffic to its own port\(proxy.map { ", <code>\(e($0))</code>" } ?? "").</p></div></div>"
        return document(
            title: name,
            head: """
                <meta http-equiv="refresh" content="3">
                <style>.steps{list-style:none;padding:0}.steps li{margin:6px 0}.steps .ok b{color:#1b7f3b}.steps .todo b{color:#a23a00}</style>
                """) + """
                <h1>This device is <span id=device>\(e(name))</span></h1>
                <p class=note>Enrolled with Busymate. This page follows its readiness as it goes (it reloads every 3 seconds).</p>
                <div class=card><h2>Readiness</h2><ul class=steps id=readiness>\(list)</ul></div>
                \(pacCard)
                <div class=card><h2>Certificate authority</h2>
                <a class=button href="\(e(caURL))">Download the CA (PEM)</a><a class=button href="\(e(derURL))">Download the CA (DER)</a>
                <p class=note>Only trust a CA you generated yourself: anyone with its key can read this device's HTTPS.</p></div>
                \(OnboardingPage.platformCards(pac: pac, ca: e(caURL), der: e(derURL), proxy: proxy))
                </main></body></html>

                """
    }

    /// The pages' start, up to `<main>`: `head` goes in the head as it is.
    static func document(title: String, head: String = "") -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Busymate · \(OnboardingPage.escape(title))</title>
        \(OnboardingPage.style)
        \(head)
        </head><body><main>

        """
    }

    /// What the link is for, and one button: opening it must not be enough
    /// (link previews fetch it too).
    static func confirm(device: String, action: String) -> String {
        let e = OnboardingPage.escape
        return document(
            title: "enrol \(device)",
            head:
                "<style>button{font:inherit;background:#2f6fed;color:#fff;border:0;padding:10px 18px;border-radius:6px;cursor:pointer}</style>"
        )
            + """
            <h1>Enrol this device as <span id=device>\(e(device))</span></h1>
            <div class=card><p>This device will be let in to the Busymate proxy, named <b>\(e(device))</b>, and given its own PAC and the CA.
            The link works for this one device only.</p>
            <form method=post action="\(e(action))"><button type=submit id=enrol>Enrol this device</button></form></div>
            </main></body></html>

            """
    }

    static func refused(title: String, why: String) -> String {
        let e = OnboardingPage.escape
        return document(title: title) + """
            <h1>\(e(title))</h1>
            <div class="card warn"><p id=why>\(e(why))</p>
            <p class=note>Whoever runs the appliance can issue a new link: <code>busymate devices link NAME</code>, or the Devices view of its web page.</p></div>
            </main></body></html>

            """
    }
}
