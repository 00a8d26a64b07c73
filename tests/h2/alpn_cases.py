"""Eager ALPN on intercepted connections (mitmproxy's eager strategy, docs/decisions.md
"HTTP/2 and gRPC"): the origin is dialled before the client's TLS handshake,
offered the client's own ALPN list, and the client is offered what the origin
chose. Each case names its rows by a token in the URL."""
import json, socket, ssl, threading, time

import h2client
from harness import check, body_json, curl


class CountingRelay:
    """A TCP relay on 127.0.0.1 port 0 in front of an origin: counts the
    connections it accepts (what the origin sees) and pipes bytes both ways."""

    def __init__(self, port, host="127.0.0.1", listen_port=0):
        self.target, self.accepted, self.closed, self.lock = port, 0, 0, threading.Lock()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((host, listen_port))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            try:
                origin = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self.pipe, args=(client, origin, True), daemon=True).start()
            threading.Thread(target=self.pipe, args=(origin, client, False), daemon=True).start()

    def pipe(self, source, sink, from_proxy):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if from_proxy:
            # Busymate closed (or reset) its connection to the origin.
            with self.lock:
                self.closed += 1

    def closed_count(self):
        with self.lock:
            return self.closed

    def count(self):
        with self.lock:
            return self.accepted

    def close(self):
        self.server.close()


def summary(rows):
    return json.dumps([{k: r.get(k) for k in ("id", "url", "status", "http_version", "stream_id", "error")} for r in rows])[:1200]


def h1_origin_offers_h1(w):
    """curl --http2 (ALPN h2,http/1.1) to an HTTP/1.1-only origin: the origin chose http/1.1, so the client is
    offered http/1.1 and speaks it, as it would to the origin itself."""
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("h1only_tls", "/echo?case=eager-h1")], "--http2")
    r = results[0]
    check(rc == 0 and r["code"] == "200", "curl --http2 to an HTTP/1.1-only origin gets 200", "rc %d %s" % (rc, log[-600:]))
    check("ALPN: server accepted http/1.1" in log or "ALPN, server accepted to use http/1.1" in log,
          "curl -v says the proxy accepted http/1.1 (what the origin chose)", [l for l in log.splitlines() if "ALPN" in l])
    check(r["version"] == "1.1", "the client speaks HTTP/1.1", "curl spoke %s" % r["version"])
    seen = body_json(r["body"]) or {}
    check(seen.get("http_version") == "HTTP/1.1", "the origin got HTTP/1.1", seen.get("http_version"))
    rows = w.busymate.rows("~u case=eager-h1")
    check(len(rows) == 1 and rows[0].get("http_version") == "HTTP/1.1" and rows[0].get("stream_id") is None,
          "the row says HTTP/1.1, no stream_id", summary(rows))


def h2_origin_one_connection(w):
    """An h2 client to an h2 origin: the origin is reached during the client's handshake (before any request),
    and that connection carries the client's streams: the origin sees one TCP connection, not a second dial."""
    relay = CountingRelay(w.origins["main_tls"])
    try:
        sock, alpn = h2client.open_mitm(w.proxy, "localhost", relay.port, w.busymate.ca)
        check(alpn == "h2", "the client negotiated h2 (the origin chose it)", "ALPN %r" % alpn)
        check(relay.count() == 1, "the origin was dialled before the client sent any request (eager ALPN)",
              "%d connections at the origin after the client's handshake" % relay.count())
        client = h2client.H2Client(sock)
        authority = "localhost:%d" % relay.port
        sids = [client.request("GET", authority, "/echo?case=eager-h2-%s" % n) for n in ("a", "b")]
        left = client.wait(sids, 15)
        statuses = [client.streams[s].status for s in sids]
        check(not left and statuses == ["200", "200"], "both streams got 200", statuses)
        seen = [body_json(bytes(client.streams[s].data)) or {} for s in sids]
        check(all(s.get("http_version") == "2" for s in seen), "the origin got both over HTTP/2", [s.get("http_version") for s in seen])
        client.close()
        time.sleep(0.3)
        check(relay.count() == 1, "the origin saw exactly one TCP connection for the client's connection",
              "%d connections" % relay.count())
        rows = w.busymate.rows("~u case=eager-h2-", expect=2)
        check(len(rows) == 2 and all(r.get("http_version") == "HTTP/2.0" for r in rows), "two HTTP/2.0 rows", summary(rows))
    finally:
        relay.close()


def h1_client_adopts(w):
    """An HTTP/1.1 client (ALPN http/1.1 alone) to an h2-capable origin: the origin is dialled during the client's
    handshake offered http/1.1 alone, and that connection carries the client's first request (one TCP connection)."""
    relay = CountingRelay(w.origins["main_tls"])
    try:
        sock, alpn = h2client.open_mitm(w.proxy, "localhost", relay.port, w.busymate.ca, alpn=("http/1.1",))
        check(alpn == "http/1.1", "the client negotiated http/1.1", "ALPN %r" % alpn)
        check(relay.count() == 1, "the origin was dialled before the client sent any request (eager ALPN)",
              "%d connections at the origin after the client's handshake" % relay.count())
        sock.settimeout(10)
        sock.sendall(b"GET /echo?case=eager-h1-client HTTP/1.1\r\nHost: localhost:%d\r\nConnection: close\r\n\r\n" % relay.port)
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (OSError, ssl.SSLError):
                break
            if not chunk:
                break
            answer += chunk
        sock.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        seen = body_json(body) or {}
        check(head.startswith(b"HTTP/1.1 200") and seen.get("http_version") == "1.1",
              "the request got 200 over HTTP/1.1, and the origin was offered http/1.1 alone (it chose 1.1)",
              "%r, origin %s" % (head[:60], seen.get("http_version")))
        check(relay.count() == 1, "the origin saw one TCP connection (the first request took the eager one)", "%d connections" % relay.count())
        rows = w.busymate.rows("~u case=eager-h1-client")
        check(len(rows) == 1 and rows[0].get("http_version") == "HTTP/1.1" and rows[0].get("status") == 200,
              "one HTTP/1.1 row with status 200", summary(rows))
    finally:
        relay.close()


def moved_first_request(w):
    """The first request goes elsewhere (a map_remote rule): the connection dialled during the handshake is
    closed unused, for an HTTP/1.1 client (the connection's slot) and for an HTTP/2 one (its pool)."""
    relay = CountingRelay(w.origins["main_tls"])
    to = "https://localhost:%d/" % w.origins["main_tls"]
    w.busymate.write_settings(rules=[{"name": "moved", "match": "localhost:%d/*" % relay.port, "action": "map_remote", "to": to}])
    w.busymate.wait_applied()
    try:
        for alpn in (("http/1.1",), ("h2", "http/1.1")):
            before = relay.count()
            sock, chosen = h2client.open_mitm(w.proxy, "localhost", relay.port, w.busymate.ca, alpn=alpn)
            check(relay.count() == before + 1, "%s: the origin was dialled during the handshake" % chosen, relay.count() - before)
            closed = relay.closed_count()
            if chosen == "h2":
                client = h2client.H2Client(sock)
                sid = client.request("GET", "localhost:%d" % relay.port, "/echo?case=eager-moved-h2")
                client.wait([sid], 10)
                status = client.streams[sid].status
            else:
                sock.settimeout(10)
                sock.sendall(b"GET /echo?case=eager-moved-h1 HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % relay.port)
                status = sock.recv(65536)[9:12].decode()
            check(status == "200", "%s: the moved request got 200 from where the rule sent it" % chosen, status)
            deadline = time.monotonic() + 2  # under the origin's own idle close (hypercorn: 5 s)
            while relay.closed_count() == closed and time.monotonic() < deadline:
                time.sleep(0.05)
            check(relay.closed_count() == closed + 1, "%s: the unused eager connection was closed while the client stays" % chosen,
                  "%d closed" % (relay.closed_count() - closed))
            check(relay.count() == before + 1, "%s: nothing more was dialled to the first target" % chosen, relay.count() - before)
            sock.close()
    finally:
        relay.close()
        w.busymate.write_settings()
        w.busymate.wait_applied()


def overridden_first_request(w):
    """The first request has a host_override rule of its own (it matches the request, not the CONNECT): it goes to
    the rule's address, not over the connection dialled during the handshake to where the name resolves, for an
    HTTP/1.1 client and for an HTTP/2 one; the eager connection carries nothing and is closed."""
    named = CountingRelay(w.origins["main_tls"])
    moved = CountingRelay(w.origins["main_tls"], host="127.0.0.2", listen_port=named.port)
    w.busymate.write_settings(rules=[{"name": "override-first", "match": "~u case=eager-override", "action": "host_override",
                                      "address": "127.0.0.2"}])
    w.busymate.wait_applied()
    try:
        for alpn in (("http/1.1",), ("h2", "http/1.1")):
            before, moved_before = named.count(), moved.count()
            sock, chosen = h2client.open_mitm(w.proxy, "localhost", named.port, w.busymate.ca, alpn=alpn)
            check(named.count() == before + 1, "%s: the origin was dialled during the handshake" % chosen, named.count() - before)
            closed = named.closed_count()
            path = "/echo?case=eager-override-%s" % chosen
            if chosen == "h2":
                client = h2client.H2Client(sock)
                sid = client.request("GET", "localhost:%d" % named.port, path)
                client.wait([sid], 10)
                status = client.streams[sid].status
            else:
                sock.settimeout(10)
                sock.sendall(b"GET %s HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (path.encode(), named.port))
                status = sock.recv(65536)[9:12].decode()
            check(status == "200", "%s: the overridden request got 200" % chosen, status)
            check(moved.count() == moved_before + 1, "%s: the request went to the rule's address (127.0.0.2), dialled for it" % chosen,
                  "%d connections at 127.0.0.2" % (moved.count() - moved_before))
            deadline = time.monotonic() + 2
            while named.closed_count() == closed and time.monotonic() < deadline:
                time.sleep(0.05)
            check(named.closed_count() == closed + 1, "%s: the unused eager connection was closed" % chosen,
                  "%d closed" % (named.closed_count() - closed))
            sock.close()
        rows = w.busymate.rows("~u case=eager-override", expect=2)
        check(len(rows) == 2 and all(r.get("status") == 200 and r.get("rule") == "override-first" for r in rows),
              "two 200 rows naming the rule", summary(rows))
    finally:
        named.close()
        moved.close()
        w.busymate.write_settings()
        w.busymate.wait_applied()


def socks_one_connection(w):
    """curl --socks5-hostname through the proxy port to an h2 origin, with --http2 and with no ALPN at all: the
    connection SOCKS5 opened to answer the client carries the TLS handshake to the origin and the request, so the
    origin sees one connection for one request."""
    relay = CountingRelay(w.origins["main_tls"])
    try:
        for name, flags, version in (("h2", ("--http2",), "2"), ("no-alpn", ("--http1.1", "--no-alpn"), "1.1")):
            before = relay.count()
            results, rc, log = curl(w.proxy, w.busymate.ca, ["https://localhost:%d/echo?case=socks-eager-%s" % (relay.port, name)], *flags,
                                    "-x", "socks5h://127.0.0.1:%d" % w.proxy)
            r = results[0]
            check(rc == 0 and r["code"] == "200" and r["version"] == version, "%s: curl over SOCKS5 got 200 over HTTP/%s" % (name, version),
                  "rc %d, code %s, version %s: %s" % (rc, r["code"], r["version"], log[-600:]))
            seen = body_json(r["body"]) or {}
            check(seen.get("http_version") == version, "%s: the origin got HTTP/%s" % (name, version), seen.get("http_version"))
            time.sleep(0.3)
            check(relay.count() == before + 1, "%s: the origin saw one TCP connection for the one request" % name,
                  "%d connections" % (relay.count() - before))
        rows = w.busymate.rows("~u case=socks-eager-", expect=2)
        check(len(rows) == 2 and all(r.get("status") == 200 and r.get("front_end") == "socks5" for r in rows),
              "two 200 rows from the socks5 front end", summary(rows))
    finally:
        relay.close()


def refused_origin(w):
    """An origin that refuses the TCP connection: the client's handshake still completes, and its request gets 502
    with the reason (eager ALPN falls back to the offer it would make without it)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    results, rc, log = curl(w.proxy, w.busymate.ca, ["https://localhost:%d/echo?case=eager-refused" % port], "--http2")
    r = results[0]
    check(r["code"] == "502", "the client completed its handshake and got 502", "rc %d, code %s: %s" % (rc, r["code"], log[-600:]))
    text = r["body"].decode("latin-1")
    check("refused" in text.lower() or "connect" in text.lower(), "the 502 says why", text[:300])


CASES = [("eager_h1_origin", h1_origin_offers_h1), ("eager_h2_one_connection", h2_origin_one_connection),
         ("eager_h1_client", h1_client_adopts), ("eager_moved_first_request", moved_first_request),
         ("eager_overridden_first_request", overridden_first_request), ("eager_socks_one_connection", socks_one_connection),
         ("eager_refused_origin", refused_origin)]
