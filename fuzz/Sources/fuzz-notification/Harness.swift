// Notification datagrams (BusymateNotification, as Notifier's reader gets
// them: a receive buffer one byte over the limit, so an oversized datagram
// arrives cut and is refused) and the datagrams Notifier posts.
//
// Properties:
// - a datagram over the limit never decodes;
// - a decoded notification, encoded again, decodes to itself (a payload's
//   line breaks become spaces, an empty payload none);
// - whatever a process posts (any name, any payload text) is a datagram
//   the others can decode, within the size limit: a long payload arrives
//   cut, and what arrives is the start of what was posted.
import BusymateShared
import FuzzSupport

/// Notifier's receive buffer.
nonisolated(unsafe) var buffer = [UInt8](repeating: 0, count: BusymateNotification.maxSize + 1)

func normalized(_ n: BusymateNotification) -> BusymateNotification {
    var copy = n
    if let payload = copy.payload {
        copy.payload = payload.isEmpty ? nil : payload.replacingOccurrences(of: "\n", with: " ")
    }
    return copy
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        // What recv() leaves in Notifier's buffer.
        let n = min(input.count, buffer.count)
        for i in 0..<n { buffer[i] = input[i] }
        let received = buffer[0..<n]
        if let decoded = try? BusymateNotification.decode(received) {
            Fuzz.check(n <= BusymateNotification.maxSize, "a \(n)-byte datagram decoded")
            let encoded = decoded.encoded()
            Fuzz.check(encoded.count <= BusymateNotification.maxSize, "re-encoded to \(encoded.count) bytes")
            let again = try? BusymateNotification.decode(encoded)
            Fuzz.check(
                again == normalized(decoded),
                "\(decoded) encodes to \(Fuzz.show(String(decoding: encoded, as: UTF8.self))), which decodes as \(String(describing: again))"
            )
        }

        // A post: the first byte picks the name, the rest is the payload.
        guard let first = input.first else { return }
        let names = NotificationName.allCases
        let name = names[Int(first) % names.count]
        let payload = String(decoding: input.dropFirst(), as: UTF8.self)
        let post = BusymateNotification(name: name, sender: "tunnel-4242", payload: payload)
        let datagram = post.encoded()
        Fuzz.check(datagram.count <= BusymateNotification.maxSize, "a post of \(datagram.count) bytes")
        do {
            let delivered = try BusymateNotification.decode(datagram)
            Fuzz.check(delivered.name == name && delivered.sender == "tunnel-4242", "a post arrives as \(delivered)")
            let sent = normalized(post)
            let whole = "\(BusymateNotification.magic) \(name.rawValue) tunnel-4242" + (sent.payload.map { " " + $0 } ?? "")
            if whole.utf8.count <= BusymateNotification.maxSize {
                Fuzz.check(delivered == sent, "a post of \(Fuzz.show(payload)) arrives as \(delivered)")
            } else {
                // Cut at the limit: what arrives is the start of what was posted.
                Fuzz.check(
                    Array(sent.payload ?? "").starts(with: Array(delivered.payload ?? "")) && (delivered.payload?.utf8.count ?? 0) > 0
                        || payload.isEmpty,
                    "a long post of \(Fuzz.show(payload)) arrives as \(delivered)")
            }
        } catch {
            Fuzz.check(false, "a post of \(name) with a \(payload.utf8.count)-byte payload cannot be decoded by its receivers: \(error)")
        }
    }
}
