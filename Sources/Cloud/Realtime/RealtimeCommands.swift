import Foundation

/// What the account's dashboard can ask of this appliance over Realtime
/// (`device:<uuid>` broadcasts). The tunnel carries them out; each returns
/// a line for the log.
public protocol RealtimeCommands: Sendable {
    /// `breakpoint-continue`: resolve the message held for `requestID`
    /// (forward as held, forward `rawHTTP` instead, or abort).
    func continueBreakpoint(requestID: String, rawHTTP: String?, abort: Bool) async -> String
    /// `settings-updated`: the effective settings fetched for this device,
    /// to merge into `settings.json`.
    func mergeSettings(_ effective: Data) async -> String
    /// `vpn-on` / `vpn-off`: the capture mode.
    func setMode(transparent: Bool) async -> String
    /// `unpair`: the account removed this device.
    func unpair() async -> String
    /// `resend-request`: send a captured request again through the proxy.
    func resend(requestID: String) async -> String
}
