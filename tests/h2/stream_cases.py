"""The HTTP/2 cases about streams: trailers (HTTP/2 and HTTP/1.1 chunked),
concurrent streams and a reset, an origin's stream limit, PING and the header
limit, GOAWAY on a tunnel restart and on idle. Each case is a function of the
World (run.py) and names its rows by a token in the URL."""
import time

import h2client
from basic_cases import odd, row_summary
from harness import check, note, body_json, curl, wait_until
from origins import RESPONSE_TRAILERS


def h2_via_mitm(w, origin, alpn=("h2", "http/1.1")):
    sock, alpn = h2client.open_mitm(w.proxy, "localhost", w.origins[origin], w.busymate.ca, alpn=alpn)
    check(alpn == "h2", "the proxy negotiated h2 with the client (ALPN)", "ALPN %r" % alpn)
    return h2client.H2Client(sock) if alpn == "h2" else None


def stored_trailers(detail, side):
    """A row's trailers of one side, names lower-cased (HTTP/1.1 ones are stored as the peer wrote them)."""
    return [[n.lower(), v] for n, v in ((detail.get(side) or {}).get("trailers") or [])]


def trailers(w):
    """Response trailers reach an h2 client and are stored; request trailers reach the origin and are stored."""
    client = h2_via_mitm(w, "main_tls")
    if client:
        try:
            sid = client.request("GET", "localhost:%d" % w.origins["main_tls"], "/trailers?case=trailers-response", [("te", "trailers")])
            client.wait([sid], 15)
            s = client.streams[sid]
            check(s.status == "200" and s.header("x-trailers-sent") == "yes", "the origin got te: trailers and sent trailers",
                  "status %s, headers %s" % (s.status, s.headers))
            check(s.ended and s.trailers and ("x-origin-trailer", "sent-after-body") in s.trailers, "the response trailers reached the client",
                  "ended %s, trailers %s, reset %s" % (s.ended, s.trailers, s.reset))
        finally:
            client.close()
    rows = w.busymate.rows("~u case=trailers-response")
    detail = w.busymate.show(rows[0]["id"]) if rows else {}
    stored = stored_trailers(detail, "response")
    check([list(t) for t in RESPONSE_TRAILERS if list(t) not in stored] == [], "the row's response.trailers has the origin's trailers", stored)
    client = h2_via_mitm(w, "h2only_tls")
    if client:
        try:
            sid = client.request("POST", "localhost:%d" % w.origins["h2only_tls"], "/echo?case=trailers-request", [("te", "trailers")],
                                 body=b"a body, then trailers", trailers=[("x-request-trailer", "from-the-client")])
            client.wait([sid], 15)
            s = client.streams[sid]
            seen = body_json(bytes(s.data)) or {}
            check(seen.get("trailers") == [["x-request-trailer", "from-the-client"]], "the request trailers reached the origin",
                  "status %s, origin saw %s" % (s.status, seen.get("trailers")))
            check(s.trailers and ("x-checksum", "abc123") in s.trailers, "the h2-only origin's trailers reached the client", s.trailers)
        finally:
            client.close()
    rows = w.busymate.rows("~u case=trailers-request")
    detail = w.busymate.show(rows[0]["id"]) if rows else {}
    stored = stored_trailers(detail, "request")
    check(["x-request-trailer", "from-the-client"] in stored, "the row's request.trailers has the client's trailer", stored)


def read_chunked_response(f):
    """An HTTP/1.1 response from a file: status, headers, the chunked body, its trailer fields."""
    status = f.readline().decode("latin-1").split(" ")[1]
    headers = {}
    while True:
        line = f.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            break
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body, trailers = b"", []
    if "chunked" not in headers.get("transfer-encoding", ""):
        return status, headers, f.read(int(headers.get("content-length", "0"))), None
    while True:
        size = int(f.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        body += f.read(size)
        f.readline()
    while True:
        line = f.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            return status, headers, body, trailers
        name, _, value = line.partition(":")
        trailers.append([name.strip().lower(), value.strip()])


def h1_chunked_trailers(w):
    """HTTP/1.1 chunked trailers both ways through the MITM: a request's reach the origin, a response's
    reach the client (it sent TE: trailers), and both are stored."""
    port = w.origins["h1only_tls"]
    sock, alpn = h2client.open_mitm(w.proxy, "localhost", port, w.busymate.ca, alpn=("http/1.1",))
    try:
        sock.settimeout(15)
        sock.sendall(("POST /chunked-trailers?case=h1-trailers HTTP/1.1\r\nHost: localhost:%d\r\nTE: trailers\r\n"
                      "Transfer-Encoding: chunked\r\nTrailer: X-Request-Trailer\r\nContent-Type: text/plain\r\n\r\n"
                      "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Request-Trailer: from-the-client\r\n\r\n" % port).encode())
        status, headers, body, trailers = read_chunked_response(sock.makefile("rb"))
    finally:
        sock.close()
    seen = body_json(body) or {}
    check(status == "200" and seen.get("body") == "hello world", "the chunked request body reached the origin", "%s %r" % (status, body[:300]))
    check(seen.get("trailers") == [["x-request-trailer", "from-the-client"]], "the request's trailer fields reached the origin", seen.get("trailers"))
    check(trailers is not None and all(list(t) in trailers for t in RESPONSE_TRAILERS), "the response's trailer fields reached the client",
          "headers %s, trailers %s" % (headers, trailers))
    rows = w.busymate.rows("~u case=h1-trailers")
    detail = w.busymate.show(rows[0]["id"]) if rows else {}
    check(["x-request-trailer", "from-the-client"] in stored_trailers(detail, "request"), "the row's request.trailers has it",
          (detail.get("request") or {}).get("trailers"))
    stored = stored_trailers(detail, "response")
    check(all(list(t) in stored for t in RESPONSE_TRAILERS), "the row's response.trailers has the origin's", stored)


def origin_max_streams(w):
    """30 streams at once from the client to an origin that allows 5 at a time (its SETTINGS): the proxy
    queues the rest, and all 30 are answered. Streams it opened before the origin's SETTINGS came are
    refused by the origin (REFUSED_STREAM, as RFC 9113 allows) and must be retried, not failed."""
    client = h2_via_mitm(w, "h2only_tls")
    if not client:
        return
    authority = "localhost:%d" % w.origins["h2only_tls"]
    try:
        sids = [client.request("GET", authority, "/echo?delay_ms=200&case=maxstreams-%02d" % i) for i in range(30)]
        left = client.wait(sids, 40)
        answers = [body_json(bytes(client.streams[s].data)) or {} for s in sids]
        done = [a for s, a in zip(sids, answers) if client.streams[s].status == "200" and a.get("path")]
        check(len(done) == 30, "all 30 streams are answered", "%d answered, %d unfinished, resets %s, goaway %s, statuses %s, a failed one's body %r" % (
            len(done), len(left), [client.streams[s].reset for s in sids if client.streams[s].reset][:5], client.goaway,
            sorted({str(client.streams[s].status) for s in sids}),
            next((bytes(client.streams[s].data)[:300] for s in sids if client.streams[s].status != "200"), b"")))
        violations = max([a.get("violations", 0) for a in done] or [0])
        check(done and violations == 0, "once the proxy had the origin's SETTINGS it opened no sixth stream", "%d streams beyond 5" % violations)
        refused = max([a.get("refused_streams", 0) for a in done] or [0])
        if refused:
            note("the origin refused %d streams the proxy opened before its SETTINGS came (REFUSED_STREAM)" % refused)
    finally:
        client.close()


def ping_and_header_limit(w):
    """PING is answered; a request with 200 KB of headers is refused (431, RST_STREAM or GOAWAY), not passed on,
    and a request after it on a new connection is answered."""
    client = h2_via_mitm(w, "main_tls")
    if not client:
        return
    authority = "localhost:%d" % w.origins["main_tls"]
    import h2.events
    try:
        acks = []
        client.on = (lambda original: lambda event: (acks.append(event) if isinstance(event, h2.events.PingAckReceived) else None) or original(event))(client.on)
        client.conn.ping(b"busymate")
        client.flush()
        for _ in range(25):
            if acks or not client.pump(0.2):
                break
        check(acks and acks[0].ping_data == b"busymate", "PING is answered with its data", "no PING ACK (closed %s)" % client.closed)
        sid = client.conn.get_next_available_stream_id()
        try:
            client.request("GET", authority, "/echo?case=big-headers", [("x-big-%d" % i, "v" * 8000) for i in range(25)])
            client.wait([sid], 10)
        except OSError as error:
            # The proxy's GOAWAY and close can come while the client is still sending the block.
            print("  (the proxy closed while the headers were being sent: %s)" % error)
            client.closed = True
        s = client.streams.get(sid)
        check((s is not None and (s.status == "431" or s.reset)) or client.goaway is not None or client.closed,
              "200 KB of request headers are refused: 431, RST_STREAM or GOAWAY",
              "status %s, reset %s, goaway %s" % (s and s.status, s and s.reset, client.goaway))
    finally:
        client.close()
    passed = [r for r in w.busymate.rows("~u case=big-headers", timeout=2) if r.get("status") == 200]
    check(passed == [], "the oversized request did not reach the origin", row_summary(passed))
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=after-big-headers")], "--http2")
    check(results[0]["code"] == "200", "a request afterwards is answered", log[-300:])


def goaway_drain(w):
    """`busymate tunnel restart` with three streams in flight on one HTTP/2 connection: the client gets a
    GOAWAY, the open streams finish (tunnel.drain_seconds is 3 here), new requests reach the new tunnel."""
    import subprocess
    client = h2_via_mitm(w, "main_tls")
    if not client:
        return
    authority = "localhost:%d" % w.origins["main_tls"]
    old = w.busymate.tunnel_pid()
    try:
        sids = [client.request("GET", authority, "/slow?n=6&ms=100&case=drain-%d" % i) for i in range(3)]
        for _ in range(20):
            if all(client.streams[s].data for s in sids) or not client.pump(0.1):
                break
        restart = subprocess.Popen([w.busymate.bin + "/busymate", "tunnel", "restart", "--group", w.busymate.group],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        client.wait(sids, 15)
        whole = [s for s in sids if client.streams[s].ended and bytes(client.streams[s].data).count(b"chunk") == 6]
        check(len(whole) == 3, "the three streams in flight finish whole across the restart", "%d whole; resets %s, goaway %s, closed %s" % (
            len(whole), [client.streams[s].reset for s in sids], client.goaway, client.closed))
        for _ in range(30):
            if client.goaway is not None or not client.pump(0.1):
                break
        check(client.goaway == 0, "the client got a GOAWAY (NO_ERROR) before the old tunnel went", "goaway %s, closed %s" % (client.goaway, client.closed))
        out = restart.communicate(timeout=30)[0]
        check(restart.returncode == 0, "busymate tunnel restart succeeded", out[-300:])
    finally:
        client.close()
    new = wait_until(lambda: w.busymate.tunnel().get("state") == "ready" and w.busymate.tunnel_pid() not in (None, old) and w.busymate.tunnel_pid(), 20)
    check(new, "a new tunnel is ready (pid %s, was %s)" % (new, old), w.busymate.tunnel())
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=after-drain")], "--http2")
    check(results[0]["code"] == "200" and results[0]["version"] == "2", "a new HTTP/2 request is answered by the new tunnel", log[-300:])
    rows = [r for r in w.busymate.rows("~u case=drain-", expect=3) if r.get("status") == 200]
    check(len(rows) == 3, "the three streams' rows are stored", row_summary(rows))


def idle_goaway(w):
    """An idle HTTP/2 connection is closed after timeouts.idle_seconds (2 here) with a GOAWAY."""
    w.busymate.write_settings(timeouts={"idle_seconds": 2})
    w.busymate.wait_applied()
    try:
        client = h2_via_mitm(w, "main_tls")
        if not client:
            return
        try:
            sid = client.request("GET", "localhost:%d" % w.origins["main_tls"], "/echo?case=idle")
            client.wait([sid], 10)
            check(client.streams[sid].status == "200", "a request is answered", client.streams[sid].status)
            began = time.monotonic()
            while time.monotonic() - began < 8 and client.pump(0.2):
                pass
            waited = time.monotonic() - began
            check(client.goaway is not None and client.closed, "after about 2 idle seconds the client got a GOAWAY and the connection closed",
                  "GOAWAY %s, closed %s after %.1f s" % (client.goaway, client.closed, waited))
            check(1.5 <= waited <= 6, "it came after about 2 s (%.1f s)" % waited, "%.1f s" % waited)
        finally:
            client.close()
    finally:
        w.busymate.write_settings()
        w.busymate.wait_applied()


def concurrent_streams(w):
    """50 streams at once on one connection; one reset mid-way; the other 49 complete."""
    client = h2_via_mitm(w, "main_tls")
    if not client:
        return
    authority = "localhost:%d" % w.origins["main_tls"]
    try:
        sids = [client.request("GET", authority, "/slow?n=8&ms=100&case=streams-%02d" % i) for i in range(50)]
        victim = sids[25]
        client.wait([], 0)
        for _ in range(20):  # the reset goes out once the victim's answer has begun
            if client.streams[victim].data or client.streams[victim].ended:
                break
            client.pump(0.1)
        client.reset(victim)
        left = client.wait([s for s in sids if s != victim], 40)
        good = [s for s in sids if s != victim and client.streams[s].status == "200" and bytes(client.streams[s].data).endswith(b"done\n")
                and bytes(client.streams[s].data).count(b"chunk") == 8]
        check(len(good) == 49, "the 49 streams not reset completed with their whole bodies",
              "%d complete, %d unfinished, goaway %s, closed %s, resets %s" % (len(good), len(left), client.goaway, client.closed,
                                                                              [(s, client.streams[s].reset) for s in sids if client.streams[s].reset]))
    finally:
        client.close()
    rows = [r for r in w.busymate.rows("~u case=streams-", expect=49, timeout=15) if r.get("status") == 200]
    complete = [r for r in rows if "case=streams-25" not in r["url"]]
    check(len(complete) == 49, "49 rows with status 200", row_summary(rows))
    check(len({r.get("connection_id") for r in complete}) == 1 and complete[0].get("connection_id"), "all on one connection_id", row_summary(rows))
    check(len({r.get("stream_id") for r in complete}) == 49 and all(odd(r.get("stream_id")) for r in complete), "49 different odd stream_ids",
          row_summary(rows))




def bodies_without_length(w):
    """GET and DELETE with a body and no content-length from an HTTP/2 client reach an
    HTTP/1.1-only origin framed (chunked), the body whole; none is left for the origin to read as a next request.
    The client offers `h2` alone, so eager ALPN still gives it h2 and its streams are translated."""
    client = h2_via_mitm(w, "h1only_tls", alpn=("h2",))
    if not client:
        return
    authority = "localhost:%d" % w.origins["h1only_tls"]
    try:
        sids = {m: client.request(m, authority, "/echo?case=unframed-%s" % m.lower(), body=b"x" * 1000) for m in ("GET", "DELETE")}
        client.wait(list(sids.values()), 15)
        for method, sid in sids.items():
            seen = body_json(bytes(client.streams[sid].data)) or {}
            check(client.streams[sid].status == "200" and seen.get("method") == method and seen.get("body_size") == 1000,
                  "%s with a 1,000-byte body and no length: the origin read the body whole" % method,
                  "status %s, origin saw %s" % (client.streams[sid].status, {k: seen.get(k) for k in ("method", "body_size")}))
        # The same connection to the origin serves the next stream: nothing of those bodies was left on it.
        after = client.request("GET", authority, "/echo?case=unframed-after")
        client.wait([after], 10)
        seen = body_json(bytes(client.streams[after].data)) or {}
        check(client.streams[after].status == "200" and seen.get("path", "").endswith("case=unframed-after"), "the next stream is answered as itself",
              "status %s, origin saw %s" % (client.streams[after].status, seen.get("path")))
    finally:
        client.close()


CASES = [
    ("trailers", trailers), ("h1_chunked_trailers", h1_chunked_trailers), ("concurrent_streams", concurrent_streams),
    ("origin_max_streams", origin_max_streams), ("ping_and_header_limit", ping_and_header_limit), ("goaway_drain", goaway_drain),
    ("idle_goaway", idle_goaway), ("bodies_without_length", bodies_without_length),
]
