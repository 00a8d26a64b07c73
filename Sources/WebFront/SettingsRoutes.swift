import BusymateShared
import CaptureStore
import Foundation
import Hummingbird

/// Settings without the file: parts of `settings.json` read and written
/// through the same validated edit as the CLI's (keys this version does
/// not know are kept), announced so both processes apply them at once.
struct SettingsRoutes<Context: RequestContext> {
    let reader: CaptureReader
    let inForce: SettingsInForce

    /// The top-level keys the page may replace, by their route names, and
    /// what each is when the file does not have it.
    static var editable: [String: (key: String, empty: JSONNode)] {
        [
            "ssl-proxying": ("ssl_proxying", JSONNode(.object([("include", JSONNode(.array([]))), ("exclude", JSONNode(.array([])))]))),
            "rules": ("rules", JSONNode(.array([]))),
            "breakpoints": ("breakpoints", JSONNode(.object([("request", JSONNode(.array([]))), ("response", JSONNode(.array([])))]))),
            "upstream-proxy": ("upstream_proxy", JSONNode(.null)),
        ]
    }

    func register(on router: Router<Context>) {
        let paths = reader.paths
        router.get("/api/settings") { _, _ in
            let data = (try? GroupFileReader.read(paths.settings, limit: SettingsFile.sizeLimit)) ?? Data()
            // A file that does not parse leaves the last good settings in force: the parts show those.
            let (snapshot, good, source) = inForce.current(data)
            // The upstream proxy's password stays in the file: the page gets a mask.
            let (_, text) = Self.masked(try? JSONParser.parse(Array(data)), String(decoding: data, as: UTF8.self))
            let (document, _) = Self.masked(try? JSONParser.parse(Array(good)), "")
            let ttl = (snapshot.settings ?? SettingsFile.parse(good).settings)?.pinTTL ?? AppSettings().pinTTL
            let pins = (try? await reader.read { try $0.pinned.all() }) ?? []
            // Each part the page edits as the file has it, and the whole document.
            let parts = Self.editable.values.sorted { $0.key < $1.key }.map { part in (part.key, document?[part.key] ?? part.empty) }
            return WebJSON.response(
                ExchangeJSON.object(
                    parts + [
                        ("valid", ExchangeJSON.bool(snapshot.error == nil)), ("error", ExchangeJSON.string(snapshot.error?.description)),
                        ("error_line", ExchangeJSON.number(snapshot.error?.position?.line)),
                        ("error_column", ExchangeJSON.number(snapshot.error?.position?.column)),
                        ("in_force", ExchangeJSON.string(source.rawValue)),
                        ("document", document ?? JSONNode(.null)), ("text", ExchangeJSON.string(text)),
                        (
                            "pinned",
                            ExchangeJSON.array(
                                pins.map { pin in
                                    ExchangeJSON.object([
                                        ("host", ExchangeJSON.string(pin.host)), ("count", ExchangeJSON.number(pin.count)),
                                        ("last_seen", ExchangeJSON.date(pin.lastSeen)), ("reason", ExchangeJSON.string(pin.reason)),
                                        ("active", ExchangeJSON.bool(pin.lastSeen.addingTimeInterval(ttl) > Date())),
                                    ])
                                })
                        ),
                    ]))
        }
        router.put("/api/settings/:part") { request, context in
            guard let part = context.parameters.get("part"), let key = Self.editable[part]?.key else {
                return WebJSON.error(.notFound, "settings parts: \(Self.editable.keys.sorted().joined(separator: ", "))")
            }
            guard let value = try await WebJSON.body(request) else {
                return WebJSON.error(.badRequest, "expected the new value of \(key), as JSON")
            }
            do {
                try SettingsFile.edit(paths.settings) { root in
                    // A key the part does not have would be kept and ignored: refused unless the file had it already.
                    let before = Self.unknownKeys(root, under: key)
                    root.set(key, Self.unmasked(value, key: key, current: root))
                    if let added = Self.unknownKeys(root, under: key).first(where: { !before.contains($0) }) {
                        throw UnknownKey(path: added)
                    }
                }
            } catch let unknown as UnknownKey {
                return WebJSON.refusedKey(unknown.key, in: key, allowed: Array(AppSettings.knownKeys[key] ?? []))
            } catch let error as SettingsError where error.unknownKey != nil {
                return WebJSON.error(
                    .badRequest,
                    "unknown key \"\(error.unknownKey ?? "")\": \(SettingsError(message: error.message, position: nil, keyPath: error.keyPath))",
                    [("key", ExchangeJSON.string(error.unknownKey)), ("key_path", ExchangeJSON.string(error.keyPath))])
            } catch let error as SettingsError {
                if let before = SettingsFile.read(paths.settings).error {
                    return WebJSON.error(.conflict, "settings.json is invalid; fix it first: \(before)")
                }
                // Its line and column would point into the rewritten file, not at anything the page showed.
                return WebJSON.error(
                    .unprocessableContent, SettingsError(message: error.message, position: nil, keyPath: error.keyPath).description,
                    [("key_path", ExchangeJSON.string(error.keyPath))])
            } catch {
                return WebJSON.error(.internalServerError, "cannot write settings.json: \(error)")
            }
            announce(paths)
            return WebJSON.ok()
        }
        router.delete("/api/pinned/:host") { _, context in
            guard let host = context.parameters.get("host") else { return WebJSON.error(.badRequest, "which host?") }
            let removed = try await reader.read(writing: true) { try $0.pinned.remove(host.lowercased()) }
            guard removed else { return WebJSON.error(.notFound, "\(host) is not pinned") }
            announce(paths)
            return WebJSON.ok()
        }
        router.post("/api/rules/test") { request, _ in
            guard let body = try await WebJSON.body(request), case let .string(url)? = body["url"]?.value else {
                return WebJSON.error(.badRequest, #"expected {"url": "https://…"}"#)
            }
            if let refused = WebJSON.unknownKey(body, allowed: ["url", "method"], in: "a rule test") { return refused }
            var method = "GET"
            if let node = body["method"] {
                guard case let .string(text) = node.value, HTTPToken.isToken(text) else {
                    return WebJSON.error(.badRequest, "\"method\" is a method name such as GET or POST (an HTTP token)")
                }
                method = text.uppercased()
            }
            guard let settings = SettingsFile.read(paths.settings).settings else {
                return WebJSON.error(.conflict, "settings.json is invalid")
            }
            return WebJSON.response(
                RuleVerdict.json(RuleVerdict.verdicts(settings.rules, url: url, method: method), url: url, method: method))
        }
    }

    static var passwordMask: String { "********" }

    struct UnknownKey: Error {
        let path: String
        var key: String { path.split(separator: ".").last.map(String.init) ?? path }
    }

    /// The keys under `key` this version does not read (`breakpoints.patterns`).
    static func unknownKeys(_ root: JSONNode, under key: String) -> [String] {
        ((try? AppSettings.decode(root))?.unknownKeys ?? []).filter { $0 == key || $0.hasPrefix(key + ".") }
    }

    /// The document and its text with `upstream_proxy.password` masked.
    static func masked(_ document: JSONNode?, _ text: String) -> (JSONNode?, String) {
        guard var document, var proxy = document["upstream_proxy"], case let .string(password)? = proxy["password"]?.value,
            !password.isEmpty
        else {
            return (document, text)
        }
        proxy.set("password", JSONNode(.string(passwordMask)))
        document.set("upstream_proxy", proxy)
        let quoted = JSONWriter.compact(JSONNode(.string(password)))
        let mask = JSONWriter.compact(JSONNode(.string(passwordMask)))
        return (document, text.replacingOccurrences(of: quoted, with: mask))
    }

    /// A proxy sent back with the mask keeps the password the file has.
    static func unmasked(_ value: JSONNode, key: String, current root: JSONNode) -> JSONNode {
        guard key == "upstream_proxy", case .string(passwordMask)? = value["password"]?.value else { return value }
        var value = value
        value.set("password", root["upstream_proxy"]?["password"] ?? JSONNode(.null))
        return value
    }

    func announce(_ paths: GroupPaths) {
        if let notifier = try? Notifier(paths: paths, role: "web-edit") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
    }
}
