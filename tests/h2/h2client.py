"""An HTTP/2 client on the `h2` library for the suite: through the explicit
proxy's CONNECT and the proxy's TLS (trusting the Busymate CA), or h2c
straight to the proxy port. Blocking sockets, one thread: the suite drives it
step by step, so a case can reset a stream mid-way or stall its window."""
import select, socket, ssl, time

import h2.config, h2.connection, h2.events, h2.exceptions, h2.settings


def connect_tunnel(proxy_port, host, port, timeout=10):
    """A socket to the proxy with `CONNECT host:port` answered 200."""
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=timeout)
    target = "%s:%d" % (host, port)
    sock.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("the proxy closed the CONNECT: %r" % head)
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 200" not in status:
        raise ConnectionError("CONNECT %s: %r" % (target, status))
    return sock


def tls(sock, host, ca, alpn=("h2", "http/1.1")):
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(list(alpn))
    wrapped = context.wrap_socket(sock, server_hostname=host)
    return wrapped


def open_mitm(proxy_port, host, port, ca, alpn=("h2", "http/1.1"), timeout=10):
    """CONNECT + TLS against the proxy's leaf; (socket, the ALPN the proxy chose)."""
    sock = tls(connect_tunnel(proxy_port, host, port, timeout), host, ca, alpn)
    return sock, sock.selected_alpn_protocol()


class MemoryTLS:
    """TLS on memory BIOs over a plain socket, for a case that ends its side
    with a TCP FIN, with or without close_notify first, and keeps reading:
    Python's SSLSocket.shutdown drops the TLS state, and unwrap waits for the
    peer's close_notify. Enough of a socket for H2Client (sendall, recv,
    fileno, pending)."""

    def __init__(self, sock, host, ca, alpn=("h2", "http/1.1")):
        context = ssl.create_default_context(cafile=ca)
        context.set_alpn_protocols(list(alpn))
        self.raw, self.incoming, self.outgoing = sock, ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.push()
                if not self.pull():
                    raise ConnectionError("the proxy closed during the TLS handshake")
        self.push()

    def push(self):
        data = self.outgoing.read()
        if data:
            self.raw.sendall(data)

    def pull(self):
        data = self.raw.recv(65536)
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()
        return data

    def selected_alpn_protocol(self):
        return self.tls.selected_alpn_protocol()

    def fileno(self):
        return self.raw.fileno()

    def pending(self):
        return self.tls.pending() or self.incoming.pending

    def sendall(self, data):
        self.tls.write(data)
        self.push()

    def recv(self, size):
        """Application data (b"" once the proxy's side has ended); blocks until some comes."""
        data = b""
        while True:
            try:
                data += self.tls.read(size)
                continue  # each read gives one record's worth: the rest of what came may be in the BIO
            except ssl.SSLWantReadError:
                if data:
                    return data
                if not self.pull():
                    return b""
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return data

    def finish(self, close_notify):
        """Ends the client's sending side: close_notify first (when asked), then a TCP FIN; reading goes on."""
        if close_notify:
            try:
                self.tls.unwrap()
            except ssl.SSLError:
                # close_notify is written by the first SSL_shutdown; the error is its second call meeting
                # what the proxy sent meanwhile, or nothing yet: its close_notify is not waited for here.
                pass
            self.push()
        self.raw.shutdown(socket.SHUT_WR)

    def wait_closed(self, timeout):
        """Seconds until the proxy closed the TCP connection (EOF or reset), or None within timeout.
        What arrives meanwhile is read raw and dropped."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if not select.select([self.raw], [], [], 0.05)[0]:
                continue
            try:
                if not self.raw.recv(65536):
                    return time.monotonic() - began
            except OSError:
                return time.monotonic() - began
        return None

    def close(self):
        self.raw.close()


def open_mitm_memory(proxy_port, host, port, ca, alpn=("h2", "http/1.1"), timeout=10):
    """As open_mitm, TLS on memory BIOs (MemoryTLS)."""
    sock = MemoryTLS(connect_tunnel(proxy_port, host, port, timeout), host, ca, alpn)
    return sock, sock.selected_alpn_protocol()


class DrainingConnection(h2.connection.H2Connection):
    """h2 closes the whole connection on any GOAWAY; RFC 9113 6.8 lets the streams up to its last stream
    id finish, so after a graceful one (NO_ERROR) this client keeps reading them."""

    def _receive_goaway_frame(self, frame):
        frames, events = super()._receive_goaway_frame(frame)
        if frame.error_code == 0:
            self.state_machine.state = h2.connection.ConnectionState.CLIENT_OPEN
        return frames, events


class Stream:
    def __init__(self):
        self.headers, self.data, self.trailers = None, bytearray(), None
        self.ended, self.reset = False, None  # reset: the error code of an RST_STREAM

    @property
    def status(self):
        return dict(self.headers or []).get(":status")

    def header(self, name):
        return dict(self.headers or []).get(name)


class H2Client:
    def __init__(self, sock, scheme="https", settings=None, validate=True):
        self.sock, self.scheme = sock, scheme
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8", validate_outbound_headers=validate,
                                           normalize_outbound_headers=validate, validate_inbound_headers=validate)
        self.conn = DrainingConnection(config)
        if settings:
            self.conn.local_settings = h2.settings.Settings(client=True, initial_values=settings)
        self.conn.initiate_connection()
        self.streams, self.stalled = {}, set()
        self.goaway, self.closed, self.protocol_error = None, False, None
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, authority, path, headers=(), body=b"", trailers=None, end=True):
        pseudo = [(":method", method), (":scheme", self.scheme), (":authority", authority), (":path", path)]
        sid = self.conn.get_next_available_stream_id()
        self.streams[sid] = Stream()
        self.conn.send_headers(sid, pseudo + list(headers), end_stream=end and not body and not trailers)
        if body:
            self.conn.send_data(sid, body, end_stream=end and not trailers)
        if trailers:
            self.conn.send_headers(sid, list(trailers), end_stream=True)
        self.flush()
        return sid

    def reset(self, sid, code=8):
        self.conn.reset_stream(sid, code)
        self.streams[sid].reset = ("sent", code)
        self.flush()

    def pump(self, timeout):
        """Reads what arrives within timeout (one read); False once the connection is closed."""
        if self.closed:
            return False
        pending = isinstance(self.sock, (ssl.SSLSocket, MemoryTLS)) and self.sock.pending()
        if not pending and not select.select([self.sock], [], [], timeout)[0]:
            return True
        try:
            data = self.sock.recv(65536)
        except (ConnectionError, ssl.SSLError, OSError):
            data = b""
        if not data:
            self.closed = True
            return False
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            self.protocol_error, self.closed = str(error), True
            return False
        for event in events:
            self.on(event)
        try:
            self.flush()
        except OSError:
            self.closed = True
        return True

    def on(self, event):
        stream = self.streams.get(getattr(event, "stream_id", None))
        if isinstance(event, h2.events.ResponseReceived) and stream:
            stream.headers = event.headers
        elif isinstance(event, h2.events.InformationalResponseReceived):
            pass
        elif isinstance(event, h2.events.DataReceived):
            if stream:
                stream.data += event.data
            if event.stream_id not in self.stalled:
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.TrailersReceived) and stream:
            stream.trailers = event.headers
        elif isinstance(event, h2.events.StreamEnded) and stream:
            stream.ended = True
        elif isinstance(event, h2.events.StreamReset) and stream:
            stream.reset = ("received", event.error_code)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event.error_code

    def wait(self, sids, timeout):
        """Until each stream ended or was reset, the connection closed, or timeout; the streams not done."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = [s for s in sids if not (self.streams[s].ended or self.streams[s].reset)]
            if not waiting or not self.pump(min(0.2, max(0.0, deadline - time.monotonic()))):
                break
        return [s for s in sids if not (self.streams[s].ended or self.streams[s].reset)]

    def close(self):
        try:
            self.conn.close_connection()
            self.flush()
        except Exception:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
