/// What a SOCKS5 client (`upstream_proxy` with `"scheme": "socks5"`) makes
/// of an upstream proxy's answers, all of them at hand (RFC 1928, with
/// RFC 1929's username/password when credentials are set): written apart
/// from SOCKS5ClientHandshake, for the harness to hold it to.
struct UpstreamModel: Equatable {
    enum End: Equatable {
        /// The answers stop short: the client waits.
        case waiting
        case refused
        /// The tunnel is open after `consumed` bytes; the rest is the server's.
        case established(consumed: Int)
    }

    var end: End
    /// Where each of the server's answers ends (it sends the next only after
    /// the client's next step): the method, then the credentials' status.
    var steps: [Int] = []
    /// Which of the client's steps were reached: credentials sent, request sent.
    var authenticated = false
    var requested = false

    init(_ bytes: [UInt8], credentials: Bool) {
        end = .waiting
        guard bytes.count >= 2 else { return }
        steps.append(2)
        guard bytes[0] == 0x05, bytes[1] == (credentials ? 0x02 : 0x00) else {
            end = .refused
            return
        }
        var at = 2
        if credentials {
            authenticated = true
            guard bytes.count >= 4 else { return }
            steps.append(4)
            // RFC 1929's VER is 0x01; Busymate reads only STATUS.
            guard bytes[3] == 0x00 else {
                end = .refused
                return
            }
            at = 4
        }
        requested = true
        // VER REP RSV ATYP BND.ADDR BND.PORT
        let reply = bytes[at...]
        guard reply.count >= 5 else { return }
        let s = reply.startIndex
        let address: Int
        switch reply[s + 3] {
        case 0x01: address = 4
        case 0x04: address = 16
        case 0x03: address = 1 + Int(reply[s + 4])
        default:
            end = .refused
            return
        }
        guard reply.count >= 4 + address + 2 else { return }
        end = reply[s] == 0x05 && reply[s + 1] == 0x00 ? .established(consumed: at + 4 + address + 2) : .refused
    }
}
