// control.sock: the bytes a peer (the CLI, the tunnel, the web front)
// writes are read as the supervisor and the tunnel read them
// (UnixSocket.receiveFrame: a 4-byte big-endian length, then the payload),
// over a real socket pair, and each frame is decoded as a ControlMessage;
// the payload is also read as the tunnel's status.json (TunnelStatus).
//
// Properties:
// - frames over the size limit and truncated frames are refused, never
//   read past;
// - a decoded message, encoded again, decodes to a message that encodes
//   the same (what a peer gets is what was sent).
import BusymateShared
import Foundation
import FuzzSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Larger inputs are cut: the writer and the reader share this thread.
let largest = 64 * 1024

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            fatalError("socketpair: \(errno)")
        }
        let reader = UnixSocket(fd: fds[0])
        let bytes = UnsafeRawBufferPointer(rebasing: input.prefix(largest))
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fds[1], bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            guard n > 0 else { break }
            offset += n
        }
        Glibc.close(fds[1])
        defer { reader.close() }

        var consumed = 0
        while true {
            let frame: (payload: [UInt8], descriptors: [Int32])?
            do {
                frame = try reader.receiveFrame()
            } catch {
                break
            }
            guard let frame else { break }
            Fuzz.check(frame.descriptors.isEmpty, "descriptors out of nowhere")
            Fuzz.check(frame.payload.count <= UnixSocket.maxFrame, "a frame of \(frame.payload.count) bytes")
            consumed += 4 + frame.payload.count
            Fuzz.check(consumed <= offset, "read \(consumed) bytes of \(offset)")
            let header = withUnsafeBytes(of: UInt32(frame.payload.count).bigEndian, Array.init)
            Fuzz.check(
                Array(bytes[(consumed - 4 - frame.payload.count)..<(consumed - frame.payload.count)]) == header,
                "frame length does not match its header")
            Fuzz.check(
                Array(bytes[(consumed - frame.payload.count)..<consumed]) == frame.payload, "frame payload differs from the bytes sent")

            _ = try? StatusCoding.decoder.decode(TunnelStatus.self, from: Data(frame.payload))
            guard let message = try? ControlMessage.decode(frame.payload) else { continue }
            guard let encoded = try? message.encoded() else {
                Fuzz.check(false, "a decoded \(message.kind) does not encode")
                return
            }
            guard let again = try? ControlMessage.decode(encoded), let reencoded = try? again.encoded() else {
                Fuzz.check(false, "an encoded \(message.kind) does not decode: \(Fuzz.show(String(decoding: encoded, as: UTF8.self)))")
                return
            }
            Fuzz.check(
                reencoded == encoded,
                "a \(message.kind) changes on its way: \(Fuzz.show(String(decoding: encoded, as: UTF8.self))) then \(Fuzz.show(String(decoding: reencoded, as: UTF8.self)))"
            )
        }
    }
}
