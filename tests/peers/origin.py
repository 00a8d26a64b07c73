"""The origin both proxies send the same requests to: plain HTTP and TLS on
loopback, port 0. Each answer says, in `X-Seen`, which marker headers the
origin received (`X-Tag`, `X-F01`...), so a client sees what a proxy added on
the way in; the path picks the response's type, status and body."""
import gzip, json, os, socket, ssl, subprocess, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Path prefix -> (Content-Type, body). The asset types are mitmproxy's ~a list.
TYPED = {
    "/json": ("application/json", b'{"ok": true}'),
    "/app.js": ("application/javascript", b"console.log(1)"),
    "/style.css": ("text/css", b"body{}"),
    "/img.png": ("image/png", b"\x89PNG\r\n\x1a\n"),
    "/font.woff2": ("font/woff2", b"wOF2"),
    "/page": ("text/html; charset=utf-8", b"<html>hello</html>"),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body_in = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        if path == "/close":  # no answer at all: an error in both proxies
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        seen = sorted(n.lower() for n in self.headers.keys() if n.lower() == "x-tag" or n.lower().startswith("x-f"))
        status, ctype, body, extra = 200, "text/plain", b"", {}
        if path.startswith("/status/"):
            status = int(path.rsplit("/", 1)[1])
            body = b"status %d" % status
        elif path == "/gz":
            body = gzip.compress(b"the secret-token is here")
            extra["Content-Encoding"] = "gzip"
        elif path in TYPED:
            ctype, body = TYPED[path]
        else:
            body = json.dumps({"method": self.command, "path": self.path, "body": body_in.decode("latin-1"), "seen": seen}).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("X-Seen", ",".join(seen) or "none")
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = answer

    def log_message(self, *args):
        pass


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def self_signed(directory):
    """A certificate for localhost and 127.0.0.1: each proxy is told not to verify it."""
    cert, key = os.path.join(directory, "origin.pem"), os.path.join(directory, "origin.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def start(directory):
    """Starts the plain and the TLS origin; returns their ports."""
    plain = QuietServer(("127.0.0.1", 0), Handler)
    secure = QuietServer(("127.0.0.1", 0), Handler)
    cert, key = self_signed(directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    for server in (plain, secure):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return plain.server_address[1], secure.server_address[1]


def dead_port():
    """A loopback port nothing listens on: the upstream refuses."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
