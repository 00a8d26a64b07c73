import BusymateShared

/// The setup page a device opens on the onboarding listener: the PAC URL
/// (and its QR code, for a phone's camera), the CA, and the steps for each
/// system. Plain HTML and CSS, no script: it must work on any browser.
enum OnboardingPage {
    /// `pacRefused`: why this address gets no PAC (no proxy listener serves it).
    static func html(pacURL: String, caURL: String, proxy: String?, transparent: Bool, pacRefused: String? = nil) -> String {
        let qr = (try? QRCode.encode(pacURL, correction: .medium).svg(quietZone: 4, label: "QR code of \(pacURL)")) ?? ""
        let pac = escape(pacURL)
        let ca = escape(caURL)
        let derURL = escape(caURL.replacingOccurrences(of: "/ca.pem", with: "/ca.der"))
        let manual = proxy.map { "Or set the proxy by hand: <code>\(escape($0))</code>." } ?? "No proxy listener serves this address."
        let pacCard =
            pacRefused.map {
                transparent
                    ? "<div class=card><h2>No PAC here</h2><p class=note>This appliance captures as this network's gateway: route the device through it; no proxy setting is needed.</p></div>"
                    : "<div class=\"card warn\"><h2>No proxy for this address yet</h2><p>\(escape($0)).</p>"
                        + "<p class=note>Ask whoever runs the appliance to change that, then reload this page.</p></div>"
            }
            ?? "<div class=\"card pac\">\(qr)<div><h2>Proxy auto-configuration (PAC) URL</h2><p><code>\(pac)</code></p><p class=note>\(manual)</p></div></div>"
        let gateway =
            transparent
            ? "<p class=note>This appliance is in transparent mode: a device that uses it as its router (gateway) is captured with no proxy setting at all. Install the CA all the same.</p>"
            : ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Busymate · set up this device</title>
            \(style)</head><body><main>
            <h1>Set up this device for Busymate</h1>
            <p class=note>Two steps: send traffic through the proxy (a PAC URL), and trust the Busymate CA so HTTPS can be inspected.</p>
            \(gateway)
            \(pacCard)
            <div class=card><h2>Certificate authority</h2>
            <a class=button href="\(ca)">Download the CA (PEM)</a><a class=button href="\(derURL)">Download the CA (DER)</a>
            <p class=note>Only trust a CA you generated yourself: anyone with its key can read this device's HTTPS.</p></div>
            \(platformCards(pac: pac, ca: ca, der: derURL, proxy: proxy))
            </main></body></html>

            """
    }

    /// The pages' look, shared with the enrolment pages.
    static let style = """
        <style>
        body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
        main{max-width:760px;margin:0 auto;padding:24px}
        h1{font-size:1.5em;margin:0 0 4px}h2{font-size:1.1em;margin:24px 0 8px}
        .card{background:#fff;border:1px solid #dde1e8;border-radius:10px;padding:16px 20px;margin:16px 0}
        .warn{border-color:#e0a100;background:#fff8e1}.pac{display:flex;gap:20px;align-items:center;flex-wrap:wrap}.pac svg{width:180px;height:180px}
        code{background:#eef1f5;padding:2px 6px;border-radius:4px;word-break:break-all}
        a.button{display:inline-block;background:#2f6fed;color:#fff;text-decoration:none;padding:8px 14px;border-radius:6px;margin:4px 8px 4px 0}
        ol{padding-left:22px}li{margin:4px 0}.note{color:#5b6475;font-size:.95em}
        </style>
        """

    /// How to set the PAC and trust the CA on each system (`pac`, `ca`,
    /// `der` already escaped).
    static func platformCards(pac: String, ca: String, der derURL: String, proxy: String?) -> String {
        """
        <div class=card><h2>Android</h2><ol>
        <li>Settings → Network &amp; internet → Wi-Fi → this network → Edit (pencil) → Advanced → Proxy: <b>Proxy Auto-Config</b>, PAC URL <code>\(pac)</code>.</li>
        <li>Download the CA (DER), then Settings → Security → Encryption &amp; credentials → Install a certificate → <b>CA certificate</b>.</li>
        <li>Apps trust user CAs only if they opt in (network security config); browsers such as Chrome do.</li></ol></div>
        <div class=card><h2>iOS and iPadOS</h2><ol>
        <li>Settings → Wi-Fi → (i) next to this network → Configure Proxy → <b>Automatic</b>, URL <code>\(pac)</code>.</li>
        <li>Open the CA (PEM) link in Safari and allow the profile; then Settings → General → VPN &amp; Device Management → install it.</li>
        <li>Settings → General → About → Certificate Trust Settings → turn on full trust for the Busymate CA.</li></ol></div>
        <div class=card><h2>Linux</h2><ol>
        <li>GNOME: Settings → Network → Network Proxy → <b>Automatic</b>, configuration URL <code>\(pac)</code>; or for one shell <code>export http_proxy=http://\(escape(proxy ?? "HOST:PORT")) https_proxy=http://\(escape(proxy ?? "HOST:PORT"))</code>.</li>
        <li>Debian and Ubuntu: <code>curl -o /usr/local/share/ca-certificates/busymate.crt \(ca) &amp;&amp; update-ca-certificates</code> (as root). Firefox keeps its own store: Settings → Certificates → Import.</li></ol></div>
        <div class=card><h2>Windows</h2><ol>
        <li>Settings → Network &amp; internet → Proxy → Use setup script: on, script address <code>\(pac)</code>.</li>
        <li>Download the CA (DER), open it → Install Certificate → Local Machine → Place all certificates in <b>Trusted Root Certification Authorities</b>.</li></ol></div>
        """
    }

    static func escape(_ text: String) -> String { QRCode.xmlEscaped(text) }
}
