import BusymateShared
import CaptureStore
import Cloud
import Foundation
import NIOPosix
import ProxyClient
import ProxyEngine

/// The dashboard's Realtime commands, carried out by the tunnel through
/// the same paths as the CLI and the page: breakpoints through the
/// store's first-resolution-wins claim, settings and the mode through
/// `settings.json` (which the tunnel and the page then apply live).
struct CloudCommands: RealtimeCommands {
    let paths: GroupPaths
    let store: StoreHandle?
    let breakpoints: BreakpointController
    let notifier: Notifier?
    /// Sends a message up the supervisor link; false: not attached.
    let tellSupervisor: @Sendable (ControlMessage) async -> Bool

    func continueBreakpoint(requestID: String, rawHTTP: String?, abort: Bool) async -> String {
        guard let store else { return "breakpoint-continue \(requestID): no capture store" }
        let repository = BreakpointRepository(database: store.database)
        let breakpoints = self.breakpoints
        do {
            return try await NIOThreadPool.singleton.runIfActive {
                guard let event = try repository.events(requestID: requestID).last(where: { $0.outcome == nil }), let id = event.id else {
                    return "breakpoint-continue \(requestID): nothing is held for that request"
                }
                let request: BreakpointEvent.Request
                var raw: Data?
                if abort {
                    request = .abort
                } else if let rawHTTP, !rawHTTP.isEmpty {
                    // The dashboard's text may end lines with \n only; HTTP wants \r\n.
                    let edited = Data(Self.crlf(rawHTTP).utf8)
                    try HeldMessageResolution.check(edited, replacing: event)
                    request = .edit
                    raw = edited
                } else {
                    request = .continue
                }
                switch try repository.request(id: id, request, raw: raw) {
                case .claimed:
                    breakpoints.carryOutRequests()
                    let outcome = try repository.find(id: id)?.outcome
                    return "breakpoint \(id) (\(requestID)): \(request.rawValue) → \(outcome?.rawValue ?? "asked")"
                case let .lost(now):
                    return
                        "breakpoint \(id) (\(requestID)) was resolved first by another: \(now.outcome?.rawValue ?? now.requested?.rawValue ?? "?")"
                case .notFound:
                    return "breakpoint-continue \(requestID): breakpoint \(id) is gone"
                }
            }
        } catch {
            return "breakpoint-continue \(requestID) refused: \(error)"
        }
    }

    /// Lines ended by \n alone get \r\n in the head; the body is left as sent.
    static func crlf(_ text: String) -> String {
        // The head ends at the first empty line, however its lines end.
        let crlfEnd = text.range(of: "\r\n\r\n")
        let lfEnd = text.range(of: "\n\n")
        let end = [crlfEnd, lfEnd].compactMap { $0 }.min { $0.lowerBound < $1.lowerBound }
        let head = end.map { String(text[..<$0.lowerBound]) } ?? text
        let fixed = head.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n")
        guard let end else { return fixed }
        return fixed + "\r\n\r\n" + text[end.upperBound...]
    }

    func mergeSettings(_ effective: Data) async -> String {
        let paths = self.paths
        do {
            let merge = try await NIOThreadPool.singleton.runIfActive { () throws -> RemoteSettings.Merge in
                let document = try JSONParser.parse(Array(effective))
                var merge = RemoteSettings.Merge()
                try SettingsFile.edit(paths.settings) { root in
                    merge = try RemoteSettings.merge(document, into: &root)
                }
                return merge
            }
            notifier?.post(.settingsDidChange)
            let ignored = merge.ignored.isEmpty ? "" : "; not settings here: \(merge.ignored.sorted().joined(separator: ", "))"
            if merge.changed.isEmpty { return "settings-updated: the account's settings are already in settings.json\(ignored)" }
            return "settings-updated: merged the account's settings into settings.json: \(merge.changed.joined(separator: ", "))\(ignored)"
        } catch {
            return "settings-updated: settings.json is unchanged: \(error)"
        }
    }

    func setMode(transparent: Bool) async -> String {
        let mode = transparent ? AppSettings.Mode.transparent : .proxy
        let paths = self.paths
        do {
            try await NIOThreadPool.singleton.runIfActive {
                try SettingsFile.edit(paths.settings) { root in root.set("mode", JSONNode(.string(mode.rawValue))) }
            }
            notifier?.post(.settingsDidChange)
            return "\(transparent ? "vpn-on" : "vpn-off"): mode is \(mode.rawValue)"
        } catch {
            return "\(transparent ? "vpn-on" : "vpn-off"): settings.json is unchanged: \(error)"
        }
    }

    func unpair() async -> String {
        guard await tellSupervisor(ControlMessage(.unpair, pid: getpid())) else {
            return "unpair: the supervisor is not reachable; run busymate unpair"
        }
        return "unpair: asked the supervisor to remove the pairing"
    }

    func resend(requestID: String) async -> String {
        guard let store else { return "resend-request \(requestID): no capture store" }
        let paths = self.paths
        do {
            let (record, body, proxy) = try await NIOThreadPool.singleton.runIfActive {
                () throws -> (ExchangeRecord, Data, (host: String, port: Int)) in
                guard let record = try TrafficRepository(database: store.database).find(requestID: requestID) else {
                    throw ResendRefusal(description: "no exchange has that request id")
                }
                guard record.tlsMode != .passthrough, record.method != "CONNECT", !record.method.isEmpty, !record.requestBodyTruncated
                else {
                    throw ResendRefusal(description: "its request was not captured whole")
                }
                let body = try BodyStore(paths: paths).body(of: record, .request) ?? Data()
                return (record, body, try OutgoingRequest.proxyAddress(paths))
            }
            let answer = try await ResendClient.send(record, body: body, resentFrom: requestID, proxy: proxy, trusting: paths.caPEM)
            return "resend-request \(requestID): \(record.method) \(record.url) → \(answer.status) \(answer.reason)"
        } catch {
            return "resend-request \(requestID) failed: \(error)"
        }
    }
}

private struct ResendRefusal: Error, CustomStringConvertible {
    var description: String
}
