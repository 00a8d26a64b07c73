import Foundation
import Testing

@testable import Cloud

@Suite struct PhoenixMessageTests {
    @Test func sentAsRealtimeReadsIt() throws {
        let message = PhoenixMessage(topic: "realtime:device:x", event: "phx_join", payload: #"{"a":1}"#, ref: "3", joinRef: "3")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(message.text.utf8)) as? [String: Any])
        #expect(object["topic"] as? String == "realtime:device:x" && object["event"] as? String == "phx_join")
        #expect((object["payload"] as? [String: Any])?["a"] as? Int == 1)
        #expect(object["ref"] as? String == "3" && object["join_ref"] as? String == "3")
        let heartbeat = try #require(
            try JSONSerialization.jsonObject(with: Data(PhoenixMessage(topic: "phoenix", event: "heartbeat", ref: "9").text.utf8))
                as? [String: Any])
        #expect(heartbeat["join_ref"] is NSNull, "a heartbeat belongs to no channel")
    }

    @Test func serverMessagesWithNullRefs() throws {
        let pushed = try #require(
            PhoenixMessage(
                text:
                    #"{"topic":"realtime:device:x","event":"broadcast","payload":{"type":"broadcast","event":"vpn-on","payload":{}},"ref":null}"#
            ))
        #expect(pushed.ref == nil && pushed.event == "broadcast")
        #expect(pushed.object["event"] as? String == "vpn-on")
        let numbered = try #require(
            PhoenixMessage(text: #"{"topic":"phoenix","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":7}"#))
        #expect(numbered.ref == "7")
        #expect(PhoenixMessage(text: "[\"1\",\"2\",\"t\",\"e\",{}]") == nil, "vsn 2.0.0's arrays are not this protocol")
        #expect(PhoenixMessage(text: "not json") == nil)
    }

    @Test func credentialReasonsWaitForANewToken() {
        #expect(RealtimeLink.isCredential("Token has expired 3 seconds ago"))
        #expect(RealtimeLink.isCredential("InvalidJWTToken: Token has expired 10 seconds ago"))
        #expect(RealtimeLink.isCredential("Unauthorized: You do not have permissions to read from this Channel topic: device:x"))
        #expect(!RealtimeLink.isCredential("unmatched topic"))
        #expect(!RealtimeLink.isCredential("the server closed realtime:devices:all"))
    }
}
