"""An HTTP/2 origin in the suite's own process that a case scripts through
the query of each request and watches afterwards: how many connections the
proxy opened, when each closed, which streams came on which, what was reset.
TLS (the suite's test CA, ALPN h2 only) on 127.0.0.1 port 0, one thread per
connection, the `h2` library. GOAWAY frames are written raw (hyperframe), so
the connection's streams below their last-stream-id can still be answered
(h2 stops sending anything once it has sent a GOAWAY itself).

Query words:
- delay_ms=N: answer N ms after the request ended;
- goaway=after: right after the answer, in the same write, GOAWAY
  (NO_ERROR) naming this stream as the last one (nginx after
  keepalive_requests); the connection stays open;
- goaway=refuse: do not answer; GOAWAY (NO_ERROR) with the last-stream-id
  below this stream, so this stream is one the origin never processed
  (RFC 9113 6.8); the connection stays open;
- goaway=twostep: on the first connection only, a graceful stop as grpc-go
  and Envoy make it: GOAWAY naming the highest stream id (2^31-1), 0.1 s
  later GOAWAY with the last-stream-id below this stream, and no answer; on
  any later connection, answered.
A stream that comes after this connection's GOAWAY, above its last-stream-id,
is refused (RST_STREAM REFUSED_STREAM) and counted.

Every answer is 200 with JSON: path, connection (1 for the first connection
accepted), stream_id.
"""
import json, select, socket, ssl, threading, time
from urllib.parse import parse_qs

import h2.config, h2.connection, h2.errors, h2.events, h2.exceptions, h2.settings
from hyperframe.frame import GoAwayFrame


class Connection:
    """What one connection from the proxy did, as the origin saw it."""

    def __init__(self, number):
        self.number, self.opened, self.closed = number, time.monotonic(), None
        self.requests = []  # (stream id, path)
        self.resets = []  # (stream id, error code) the proxy sent
        self.goaway_last = None  # the last-stream-id of the GOAWAY this origin sent
        self.refused_after_goaway = 0
        self.split_ends = []  # paths of bodyless requests whose end came in a frame after their HEADERS

    def describe(self):
        return "connection %d: requests %s, resets %s, goaway last %s, refused after it %d, ends apart %s, %s" % (
            self.number, self.requests, self.resets, self.goaway_last, self.refused_after_goaway, self.split_ends,
            "closed %.2f s after it opened" % (self.closed - self.opened) if self.closed else "open")


class ScriptedOrigin:
    def __init__(self, cert, key, max_streams=None):
        self.max_streams = max_streams  # SETTINGS_MAX_CONCURRENT_STREAMS advertised (None: h2's default)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2"])
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock, self.connections, self.stopping = threading.Lock(), [], False
        self.sockets = []
        threading.Thread(target=self.accept, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        self.stopping = True
        for s in [self.listener] + self.sockets:
            try:
                s.close()
            except OSError:
                pass

    def snapshot(self):
        with self.lock:
            return list(self.connections)

    def describe(self):
        return "; ".join(c.describe() for c in self.snapshot()) or "no connection"

    def requested(self, token):
        """The connection a request whose path holds token came on, or None."""
        return next((c for c in self.snapshot() if any(token in path for _, path in c.requests)), None)

    def accept(self):
        while not self.stopping:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                record = Connection(len(self.connections) + 1)
                self.connections.append(record)
            self.sockets.append(raw)
            threading.Thread(target=self.serve, args=(raw, record), daemon=True).start()

    def serve(self, raw, record):
        try:
            raw.settimeout(10)
            sock = self.context.wrap_socket(raw, server_side=True)
            sock.settimeout(None)
            self.speak(sock, record)
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            with self.lock:
                record.closed = record.closed or time.monotonic()
            try:
                raw.close()
            except OSError:
                pass

    def speak(self, sock, record):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        if self.max_streams:
            conn.local_settings = h2.settings.Settings(client=False, initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        paths, due = {}, []  # due: (when, stream id)

        def goaway(last):
            frame = GoAwayFrame(0)
            frame.last_stream_id, frame.error_code = last, 0
            with self.lock:
                record.goaway_last = last
            return frame.serialize()

        while True:
            now = time.monotonic()
            out = b""
            for when, sid in sorted(d for d in due if d[0] <= now):
                due.remove((when, sid))
                body = json.dumps({"path": paths[sid], "connection": record.number, "stream_id": sid}).encode()
                try:
                    conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"), ("content-length", str(len(body)))])
                    conn.send_data(sid, body, end_stream=True)
                except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                    continue  # the proxy reset it meanwhile
                out += conn.data_to_send()
                if "goaway=after" in paths[sid]:
                    out += goaway(sid)
            if out:
                sock.sendall(out)
            wait = max(0.0, min([w for w, _ in due] or [now + 0.5]) - now)
            if not sock.pending() and not select.select([sock], [], [], wait)[0]:
                continue
            data = sock.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                sid = getattr(event, "stream_id", None)
                if isinstance(event, h2.events.RequestReceived):
                    path = dict(event.headers).get(":path", "")
                    if record.goaway_last is not None and sid > record.goaway_last:
                        conn.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
                        with self.lock:
                            record.refused_after_goaway += 1
                        continue
                    paths[sid] = path
                    with self.lock:
                        record.requests.append((sid, path))
                        if event.stream_ended is None and dict(event.headers).get(":method") in ("GET", "HEAD"):
                            record.split_ends.append(path)
                    if "goaway=refuse" in path:
                        sock.sendall(conn.data_to_send() + goaway(max(0, sid - 2)))
                    if "goaway=twostep" in path and record.number == 1:
                        sock.sendall(conn.data_to_send() + goaway(0x7FFFFFFF))
                        time.sleep(0.1)
                        sock.sendall(goaway(max(0, sid - 2)))
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, sid)
                elif isinstance(event, h2.events.StreamReset):
                    due[:] = [d for d in due if d[1] != sid]
                    with self.lock:
                        record.resets.append((sid, int(event.error_code)))
                unanswered = "goaway=refuse" in paths.get(sid, "") or ("goaway=twostep" in paths.get(sid, "") and record.number == 1)
                if isinstance(event, h2.events.StreamEnded) and sid in paths and not unanswered:
                    delay = int(parse_qs(paths[sid].partition("?")[2]).get("delay_ms", ["0"])[0])
                    due.append((time.monotonic() + delay / 1000, sid))
            sock.sendall(conn.data_to_send())
