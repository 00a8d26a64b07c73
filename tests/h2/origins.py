#!/usr/bin/env python3
"""The HTTP origins of the HTTP/2 suite, in a process of their own (so the
suite's clients and their timings do not share a GIL with them), all on
127.0.0.1 port 0, TLS with a certificate for localhost signed by the suite's
test CA:

- main: hypercorn (ASGI), h2 and http/1.1 by ALPN over TLS, and plaintext
  (HTTP/1.1, h2c prior knowledge) on a second port;
- h1only: Python's http.server, TLS offering only http/1.1, and plaintext;
- h2only: a server on the `h2` library, TLS that must negotiate h2 (any
  other ALPN is closed unanswered); it echoes the request trailers and sends
  response trailers of its own.

usage: origins.py --cert PEM --key KEY --out PORTS.json
Every answer of /echo is JSON: method, path, http_version, headers
([[name, value]…], names lower case), body_size, body_sha256, body (text,
the first 2,000 characters), trailers (h2only).
"""
import argparse, asyncio, hashlib, json, os, socket, ssl, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

sys.dont_write_bytecode = True

RESPONSE_TRAILERS = [("x-origin-trailer", "sent-after-body"), ("x-checksum", "abc123")]


def pattern(size):
    """size deterministic bytes (the client recomputes them to check a body)."""
    block = bytes(range(256)) * 256
    return (block * (size // len(block) + 1))[:size]


def echo_json(method, path, version, headers, body, trailers=None):
    return json.dumps({
        "method": method, "path": path, "http_version": version,
        "headers": [[n.lower(), v] for n, v in headers], "body_size": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(), "body": body[:2000].decode("latin-1"),
        "trailers": trailers,
    }).encode()


# --- main: hypercorn ----------------------------------------------------------

async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path, query = scope["path"], parse_qs(scope["query_string"].decode())
    headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]]
    version = scope["http_version"]

    async def start(status=200, extra=(), trailers=False):
        await send({"type": "http.response.start", "status": status, "trailers": trailers,
                    "headers": [(b"x-origin", b"main"), (b"x-origin-http-version", version.encode())] +
                               [(n.encode(), v.encode()) for n, v in extra]})

    if path.startswith("/trailers"):
        # Trailers only where hypercorn can send them (HTTP/2, with `te: trailers` asked).
        able = "http.response.trailers" in scope.get("extensions", {}) and ("te", "trailers") in [(n.lower(), v) for n, v in headers]
        await start(extra=[("content-type", "text/plain"), ("x-trailers-sent", "yes" if able else "no")], trailers=able)
        await send({"type": "http.response.body", "body": b"body before the trailers\n", "more_body": False})
        if able:
            await send({"type": "http.response.trailers", "more_trailers": False,
                        "headers": [(n.encode(), v.encode()) for n, v in RESPONSE_TRAILERS]})
    elif path.startswith("/slow"):
        count, pause = int(query.get("n", ["10"])[0]), int(query.get("ms", ["100"])[0]) / 1000
        await start(extra=[("content-type", "text/plain")])
        for i in range(count):
            await send({"type": "http.response.body", "body": b"chunk %d\n" % i, "more_body": True})
            await asyncio.sleep(pause)
        await send({"type": "http.response.body", "body": b"done\n", "more_body": False})
    elif path.startswith("/big"):
        size = int(query.get("size", ["200000"])[0])
        await start(extra=[("content-type", "application/octet-stream"), ("content-length", str(size))])
        data, step = pattern(size), 65536
        for offset in range(0, size, step):
            await send({"type": "http.response.body", "body": data[offset:offset + step], "more_body": offset + step < size})
        if size == 0:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif path.startswith("/page"):
        # A page with ten scripts, as a browser loads it: each sets a mark when it ran.
        case = query.get("case", ["page"])[0]
        tags = "".join('<script src="/asset.js?case=%s&i=%d"></script>' % (case, i) for i in range(10))
        out = ("<!doctype html><html><head><title>h2 page</title>%s</head><body><p id=done>%s</p></body></html>" % (tags, version)).encode()
        await start(extra=[("content-type", "text/html"), ("content-length", str(len(out)))])
        await send({"type": "http.response.body", "body": out, "more_body": False})
    elif path.startswith("/asset.js"):
        out = b"window.loaded = (window.loaded || 0) + 1;"
        await start(extra=[("content-type", "application/javascript"), ("content-length", str(len(out)))])
        await send({"type": "http.response.body", "body": out, "more_body": False})
    elif path.startswith("/empty"):
        await start(extra=[("content-length", "0")])
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    else:
        out = echo_json(scope["method"], path + ("?" + scope["query_string"].decode() if scope["query_string"] else ""), version, headers, body)
        await start(extra=[("content-type", "application/json"), ("content-length", str(len(out)))])
        await send({"type": "http.response.body", "body": out, "more_body": False})


def bound_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(512)
    s.set_inheritable(True)
    return s


async def serve_main(cert, key, tls_sock, plain_sock):
    from hypercorn.asyncio import serve
    from hypercorn.config import Config
    config = Config()
    config.certfile, config.keyfile = cert, key
    config.bind = ["fd://%d" % tls_sock.fileno()]
    config.insecure_bind = ["fd://%d" % plain_sock.fileno()]
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog, config.errorlog = None, None
    config.h2_max_concurrent_streams = 200
    config.keep_alive_timeout = 5  # idle connections close soon, so passed-through tunnels' rows are written
    await serve(asgi, config)


# --- h1only: http.server ------------------------------------------------------

class H1Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def chunked_body(self):
        """A chunked request body and its trailer fields."""
        body, trailers = b"", []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                break
            body += self.rfile.read(size)
            self.rfile.readline()
        while True:
            line = self.rfile.readline().rstrip(b"\r\n")
            if not line:
                return body, trailers
            name, _, value = line.decode("latin-1").partition(":")
            trailers.append([name.strip().lower(), value.strip()])

    def answer(self):
        trailers = None
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body, trailers = self.chunked_body()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
        out = echo_json(self.command, self.path, self.request_version, list(self.headers.items()), body, trailers)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Origin", "h1only")
        if self.path.startswith("/chunked-trailers"):
            # The answer chunked, with trailer fields after its last chunk.
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", ", ".join(n for n, v in RESPONSE_TRAILERS))
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n" % (len(out), out))
            self.wfile.write(b"".join(b"%s: %s\r\n" % (n.encode(), v.encode()) for n, v in RESPONSE_TRAILERS) + b"\r\n")
            return
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer

    def log_message(self, *args):
        pass


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        pass


def serve_h1only(cert, key):
    plain = QuietServer(("127.0.0.1", 0), H1Handler)
    secure = QuietServer(("127.0.0.1", 0), H1Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["http/1.1"])
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    for server in (plain, secure):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return secure.server_address[1], plain.server_address[1]


# --- h2only: the h2 library ---------------------------------------------------

H2ONLY_MAX_STREAMS = 5  # what the h2-only origin advertises: a proxy must queue beyond it


async def h2only_connection(reader, writer):
    import h2.config, h2.connection, h2.errors, h2.events, h2.settings
    if writer.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
        writer.close()  # HTTP/2 only: anything else is not answered
        return
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    limit = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
    conn.local_settings = h2.settings.Settings(client=False, initial_values={limit: H2ONLY_MAX_STREAMS})
    conn.initiate_connection()
    # The limit is advertised; it is enforced here rather than by h2 (which ends the connection): a stream
    # beyond it is refused (RST_STREAM REFUSED_STREAM, RFC 9113 5.1.2), a violation once the proxy ACKed it.
    conn.local_settings = h2.settings.Settings(client=False, initial_values={limit: 1 << 20})
    # Its SETTINGS come 200 ms late (a busy server): a proxy that opens streams before they came
    # meets the limit as refused streams, every run, not by chance.
    await asyncio.sleep(0.2)
    writer.write(conn.data_to_send())
    streams, state = {}, {"open": 0, "max_open": 0, "acked": False, "refused": 0, "violations": 0}

    async def answer(sid, s):
        pseudo = dict((n, v) for n, v in s["headers"] if n.startswith(":"))
        delay = parse_qs(pseudo.get(":path", "").partition("?")[2]).get("delay_ms", ["0"])[0]
        await asyncio.sleep(int(delay) / 1000)
        out = echo_json(pseudo.get(":method"), pseudo.get(":path"), "2", [(n, v) for n, v in s["headers"] if not n.startswith(":")],
                        s["body"], s["trailers"])
        body = json.loads(out)
        body["max_open_streams"] = state["max_open"]  # the most streams the proxy had open here at once so far
        body["refused_streams"], body["violations"] = state["refused"], state["violations"]
        out = json.dumps(body).encode()
        try:
            conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"), ("x-origin", "h2only")])
            conn.send_data(sid, out)
            conn.send_headers(sid, RESPONSE_TRAILERS, end_stream=True)
            writer.write(conn.data_to_send())
        except Exception:
            pass
        state["open"] -= 1

    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.SettingsAcknowledged):
                    state["acked"] = True
                elif isinstance(event, h2.events.RequestReceived):
                    if state["open"] >= H2ONLY_MAX_STREAMS:
                        conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        state["refused"] += 1
                        state["violations"] += 1 if state["acked"] else 0
                        continue
                    streams[event.stream_id] = {"headers": event.headers, "body": b"", "trailers": None}
                    state["open"] += 1
                    state["max_open"] = max(state["max_open"], state["open"])
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_id in streams:
                        streams[event.stream_id]["body"] += event.data
                elif isinstance(event, h2.events.TrailersReceived) and event.stream_id in streams:
                    streams[event.stream_id]["trailers"] = [[n, v] for n, v in event.headers]
                elif isinstance(event, h2.events.StreamReset):
                    if streams.pop(event.stream_id, None) is not None:
                        state["open"] -= 1
                if isinstance(event, h2.events.StreamEnded):
                    s = streams.pop(event.stream_id, None)
                    if s is not None:
                        asyncio.ensure_future(answer(event.stream_id, s))
            writer.write(conn.data_to_send())
            await writer.drain()
    except Exception:
        pass  # a protocol error (more streams than advertised among them): the connection ends
    finally:
        writer.close()


async def serve_h2only(cert, key):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    server = await asyncio.start_server(h2only_connection, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1]


async def main_async(args):
    tls_sock, plain_sock = bound_socket(), bound_socket()
    h1_tls, h1_plain = serve_h1only(args.cert, args.key)
    h2_server, h2_port = await serve_h2only(args.cert, args.key)
    ports = {"main_tls": tls_sock.getsockname()[1], "main_plain": plain_sock.getsockname()[1],
             "h1only_tls": h1_tls, "h1only_plain": h1_plain, "h2only_tls": h2_port}
    task = asyncio.ensure_future(serve_main(args.cert, args.key, tls_sock, plain_sock))
    await asyncio.sleep(0.3)
    with open(args.out + ".tmp", "w") as f:
        json.dump(ports, f)
    os.rename(args.out + ".tmp", args.out)
    await task


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", required=True)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
