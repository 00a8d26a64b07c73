import Testing

@testable import Tunnel

@Suite struct CloudCommandsTests {
    @Test func theDashboardsLineEndsBecomeHTTPs() {
        #expect(CloudCommands.crlf("GET /a HTTP/1.1\nHost: x\n\n") == "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(
            CloudCommands.crlf("POST /a HTTP/1.1\nHost: x\n\nline1\nline2") == "POST /a HTTP/1.1\r\nHost: x\r\n\r\nline1\nline2",
            "the body stays as sent")
        #expect(CloudCommands.crlf("GET /a HTTP/1.1\r\nHost: x\r\n\r\n") == "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(
            CloudCommands.crlf("POST /a HTTP/1.1\nHost: x\n\n--b\r\nContent-Disposition: form-data\r\n")
                == "POST /a HTTP/1.1\r\nHost: x\r\n\r\n--b\r\nContent-Disposition: form-data\r\n",
            "a body's CRLFs do not keep the head's LFs")
        #expect(CloudCommands.crlf("GET /a HTTP/1.1\r\nHost: x\nAccept: */*\n\n") == "GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
    }
}
