"""The HTTP/2 cases about how connections end, on a scripted origin
(scripted_origin.py) that counts the proxy's connections and sees them close:
a client's FIN after its streams are answered and while one still waits, an
origin's GOAWAY after an answer, one that refuses a stream in flight, and one
that comes while a stream waits behind the origin's stream limit."""
import time

import h2client
from basic_cases import row_summary
from harness import check, note, body_json, wait_until
from scripted_origin import ScriptedOrigin

# Well above what a prompt close takes, well below timeouts.idle_seconds (60 by default):
# a connection still open after this was not closed because of the FIN.
PROMPT = 3


def mitm_client(w, origin, memory=False):
    """An h2 client through CONNECT + the proxy's TLS to the scripted origin: (client, socket), or (None, None)."""
    opener = h2client.open_mitm_memory if memory else h2client.open_mitm
    sock, alpn = opener(w.proxy, "localhost", origin.port, w.busymate.ca)
    if not check(alpn == "h2", "the proxy negotiated h2 with the client (ALPN)", "ALPN %r" % alpn):
        sock.close()
        return None, None
    return h2client.H2Client(sock), sock


def took(seconds):
    return " (%.3f s)" % seconds if seconds is not None else ""


def ended_how(close_notify):
    return "FIN after close_notify" if close_notify else "FIN without close_notify"


def client_fin_ends_connection(w):
    """A client that ends with a TCP FIN (with and without TLS close_notify) once its three streams are answered:
    the proxy closes the client connection within 3 s (not at timeouts.idle_seconds), the origin connection
    those streams used is closed too, and the three rows are stored (200, one connection_id)."""
    for close_notify in (False, True):
        tag = "notify" if close_notify else "ragged"
        how = ended_how(close_notify)
        with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
            client, sock = mitm_client(w, origin, memory=True)
            if not client:
                return
            authority = "localhost:%d" % origin.port
            try:
                sids = [client.request("GET", authority, "/answer?case=fin-%s-%d" % (tag, i)) for i in range(3)]
                client.wait(sids, 10)
                answered = [s for s in sids if client.streams[s].status == "200" and client.streams[s].ended]
                check(len(answered) == 3, "%s: the three streams are answered first" % how,
                      "%d answered; %s" % (len(answered), origin.describe()))
                sock.finish(close_notify)
                closed = sock.wait_closed(PROMPT)
                check(closed is not None, "%s: the proxy closed the client connection within %d s%s" % (how, PROMPT, took(closed)),
                      "still open after %d s (timeouts.idle_seconds is 60)" % PROMPT)
                gone = wait_until(lambda: origin.snapshot() and all(c.closed for c in origin.snapshot()), PROMPT, 0.05)
                check(gone and len(origin.snapshot()) == 1, "%s: the origin connection the streams used is closed too" % how, origin.describe())
            finally:
                client.close()
        rows = [r for r in w.busymate.rows("~u case=fin-%s-" % tag, expect=3) if r.get("status") == 200 and not r.get("error")]
        check(len(rows) == 3 and len({r.get("connection_id") for r in rows}) == 1, "%s: three rows, 200, one connection_id" % how, row_summary(rows))


def client_fin_mid_stream(w):
    """A FIN (with and without close_notify) while a stream still waits for its answer (the origin answers after
    4 s): HTTP/2 has no half-close, so the connection and that stream end at once, as docs/usage.md says and mitmproxy
    does: the client connection is closed within 3 s, the origin sees its stream reset or its connection closed
    within 3 s, the answered stream's row is 200 and the waiting one's row says the client closed."""
    for close_notify in (False, True):
        tag = "notify" if close_notify else "ragged"
        how = ended_how(close_notify)
        with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
            client, sock = mitm_client(w, origin, memory=True)
            if not client:
                return
            authority = "localhost:%d" % origin.port
            try:
                done = client.request("GET", authority, "/answer?case=finmid-%s-done" % tag)
                client.wait([done], 10)
                check(client.streams[done].status == "200", "%s: the first stream is answered" % how, origin.describe())
                waiting = client.request("GET", authority, "/answer?delay_ms=4000&case=finmid-%s-waiting" % tag)
                arrived = wait_until(lambda: origin.requested("finmid-%s-waiting" % tag), 5, 0.02)
                check(arrived, "%s: the waiting stream reached the origin" % how, origin.describe())
                sock.finish(close_notify)
                fin = time.monotonic()
                closed = sock.wait_closed(PROMPT)
                check(closed is not None, "%s: the proxy closed the client connection within %d s%s, not after the answer" % (how, PROMPT, took(closed)),
                      "still open after %d s" % PROMPT)
                # The origin learns the stream is not wanted: RST_STREAM on it, or its connection closed.
                told = wait_until(lambda: arrived and (arrived.closed or any(sid for sid, _ in arrived.resets)), PROMPT, 0.05)
                check(told and time.monotonic() - fin < 3.9, "%s: the origin saw the waiting stream reset or its connection closed before it answered" % how,
                      origin.describe())
                gone = wait_until(lambda: all(c.closed for c in origin.snapshot()), PROMPT, 0.05)
                check(gone, "%s: the origin connection is closed" % how, origin.describe())
                check(client.streams[waiting].status is None, "%s: no answer reached the client for the waiting stream" % how,
                      client.streams[waiting].status)
            finally:
                client.close()
        rows = w.busymate.rows("~u case=finmid-%s-" % tag, expect=2)
        first = [r for r in rows if "-done" in r["url"]]
        check(len(first) == 1 and first[0].get("status") == 200 and not first[0].get("error"), "%s: the answered stream's row is 200" % how,
              row_summary(rows))
        cut = [r for r in rows if "-waiting" in r["url"]]
        check(len(cut) == 1 and cut[0].get("status") != 200 and "client closed" in (cut[0].get("error") or ""),
              "%s: the waiting stream's row says the client closed before the exchange completed" % how, row_summary(rows))


def bodyless_requests_one_frame(w):
    """GETs, one after another and then ten at once, on one client connection: each reaches the origin as one
    HEADERS frame carrying END_STREAM, as the client sent it, on the proxy's one origin connection. Sent as
    HEADERS and then an empty DATA frame with END_STREAM, an origin that answers at the HEADERS (nginx does)
    resets the stream to refuse the rest, and NIO counts those resets as an attack."""
    with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
        client, _ = mitm_client(w, origin)
        if not client:
            return
        authority = "localhost:%d" % origin.port
        try:
            statuses = []
            for i in range(5):
                sid = client.request("GET", authority, "/answer?case=oneframe-seq-%d" % i)
                client.wait([sid], 10)
                statuses.append(client.streams[sid].status)
            sids = [client.request("GET", authority, "/answer?case=oneframe-burst-%d" % i) for i in range(10)]
            client.wait(sids, 10)
            statuses += [client.streams[s].status for s in sids]
            check(statuses == ["200"] * 15, "all 15 GETs are answered", "%s; %s" % (statuses, origin.describe()))
            conns = origin.snapshot()
            check(len(conns) == 1 and len(conns[0].requests) == 15, "they went on one origin connection", origin.describe())
            check(all(not c.split_ends for c in conns), "each came as one HEADERS frame with END_STREAM", origin.describe())
            check(all(not c.resets for c in conns), "the proxy reset none of them", origin.describe())
        finally:
            client.close()


def origin_goaway_new_connection(w):
    """The origin answers a stream and sends GOAWAY naming it the last (nginx after keepalive_requests), keeping
    its connection open: the proxy retires that connection, and the client's next stream on the same client
    connection goes on a new origin connection and is answered. The origin counts 2 connections, none of its
    streams came after its GOAWAY, and both rows are 200."""
    with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
        client, _ = mitm_client(w, origin)
        if not client:
            return
        authority = "localhost:%d" % origin.port
        try:
            first = client.request("GET", authority, "/answer?goaway=after&case=goaway-new-1")
            client.wait([first], 10)
            seen = body_json(bytes(client.streams[first].data)) or {}
            check(client.streams[first].status == "200" and seen.get("connection") == 1, "the first stream is answered on origin connection 1",
                  "status %s, %s" % (client.streams[first].status, origin.describe()))
            wait_until(lambda: origin.snapshot() and origin.snapshot()[0].goaway_last is not None, 2, 0.02)
            second = client.request("GET", authority, "/answer?case=goaway-new-2")
            client.wait([second], 10)
            s = client.streams[second]
            seen = body_json(bytes(s.data)) or {}
            check(s.status == "200" and seen.get("connection") == 2, "the next stream on the same client connection is answered on a new origin connection",
                  "status %s, reset %s, body %r; %s" % (s.status, s.reset, bytes(s.data)[:300], origin.describe()))
            conns = origin.snapshot()
            check(len(conns) == 2, "the origin counted 2 connections", origin.describe())
            check(sum(c.refused_after_goaway for c in conns) == 0, "no stream came on the retired connection after its GOAWAY", origin.describe())
        finally:
            client.close()
        gone = wait_until(lambda: all(c.closed for c in origin.snapshot()), PROMPT, 0.05)
        check(gone, "once the client has gone, both origin connections are closed, the retired one too", origin.describe())
    rows = [r for r in w.busymate.rows("~u case=goaway-new-", expect=2) if r.get("status") == 200 and not r.get("error")]
    check(len(rows) == 2, "both rows are 200", row_summary(rows))


def origin_goaway_refuses_stream(w):
    """Two streams in flight on one origin connection; on the second the origin sends GOAWAY whose
    last-stream-id is the first (RFC 9113 6.8: the second was never processed, so it may be retried) and keeps
    the connection open. The first is answered on that connection; the second is retried once on a new
    connection and answered (RFC 9113 8.7), or answered 502 with an error that says why, within a few seconds
    (not at timeouts.upstream_response_seconds); the rows say what the client saw."""
    retried = False
    with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
        client, _ = mitm_client(w, origin)
        if not client:
            return
        authority = "localhost:%d" % origin.port
        try:
            first = client.request("GET", authority, "/answer?delay_ms=1500&case=goaway-low-first")
            check(wait_until(lambda: origin.requested("goaway-low-first"), 5, 0.02), "the first stream reached the origin", origin.describe())
            second = client.request("GET", authority, "/answer?goaway=refuse&case=goaway-low-second")
            began = time.monotonic()
            client.wait([first, second], 8)
            took = time.monotonic() - began
            a, b = client.streams[first], client.streams[second]
            seen_a, seen_b = body_json(bytes(a.data)) or {}, body_json(bytes(b.data)) or {}
            check(a.status == "200" and seen_a.get("connection") == 1, "the first stream (at the last-stream-id) is answered on its connection",
                  "status %s, reset %s; %s" % (a.status, a.reset, origin.describe()))
            refused = origin.requested("goaway-low-second")
            sid = next((s for s, p in refused.requests if "goaway-low-second" in p), None) if refused else None
            check(refused and refused.number == 1 and refused.goaway_last is not None and sid is not None and sid > refused.goaway_last,
                  "the second stream came on the same origin connection, above the GOAWAY's last-stream-id", origin.describe())
            retried = b.status == "200" and seen_b.get("connection") == 2
            failed = b.status == "502" and b.ended
            check(retried or failed, "the refused stream is retried on a new connection (200) or answered 502, in %.1f s" % took,
                  "status %s, reset %s, body %r; %s" % (b.status, b.reset, bytes(b.data)[:300], origin.describe()))
            if failed:
                note("the refused stream was answered 502 (not retried): %r" % bytes(b.data)[:300])
                check(b"GOAWAY" in bytes(b.data) or b"refused" in bytes(b.data).lower(), "the 502's body says the origin refused the stream (GOAWAY)",
                      bytes(b.data)[:300])
            else:
                note("the refused stream was retried on origin connection %s" % seen_b.get("connection"))
        finally:
            client.close()
    rows = w.busymate.rows("~u case=goaway-low-", expect=2)
    by = {("first" if "first" in r["url"] else "second"): r for r in rows}
    check(by.get("first", {}).get("status") == 200, "the first stream's row is 200", row_summary(rows))
    expected = 200 if retried else 502
    check(by.get("second", {}).get("status") == expected, "the refused stream's row says %d, as the client saw" % expected, row_summary(rows))


def origin_goaway_queued_stream(w):
    """An origin that allows one stream at a time (SETTINGS_MAX_CONCURRENT_STREAMS 1) answers the first stream
    after 1 s and sends GOAWAY naming it the last, keeping its connection open; the client's second stream,
    sent meanwhile, waited in the proxy behind the origin's limit and never reached the origin. It must go on a
    new origin connection and be answered (it never left Busymate, so nothing stops a retry), within a few
    seconds, not at timeouts.upstream_response_seconds as the origin's silence."""
    with ScriptedOrigin(w.certs["chain"], w.certs["key"], max_streams=1) as origin:
        client, _ = mitm_client(w, origin)
        if not client:
            return
        authority = "localhost:%d" % origin.port
        try:
            first = client.request("GET", authority, "/answer?delay_ms=1000&goaway=after&case=goaway-queued-first")
            check(wait_until(lambda: origin.requested("goaway-queued-first"), 5, 0.02), "the first stream reached the origin", origin.describe())
            second = client.request("GET", authority, "/answer?case=goaway-queued-second")
            client.wait([first, second], 6)
            a, b = client.streams[first], client.streams[second]
            check(a.status == "200", "the first stream is answered", "status %s, reset %s; %s" % (a.status, a.reset, origin.describe()))
            seen = body_json(bytes(b.data)) or {}
            check(b.status == "200" and seen.get("connection") == 2, "the queued stream is answered on a new origin connection",
                  "status %s, reset %s, body %r; %s" % (b.status, b.reset, bytes(b.data)[:300], origin.describe()))
            check(sum(c.refused_after_goaway for c in origin.snapshot()) == 0, "no stream came on the retired connection after its GOAWAY",
                  origin.describe())
        finally:
            client.close()
    rows = [r for r in w.busymate.rows("~u case=goaway-queued-", expect=2) if r.get("status") == 200]
    check(len(rows) == 2, "both rows are 200", row_summary(w.busymate.rows("~u case=goaway-queued-", expect=2, timeout=1)))


def origin_goaway_two_steps(w):
    """A graceful stop as grpc-go, Envoy and h2o make it: GOAWAY naming the highest stream id, then (0.1 s later)
    GOAWAY with the real last-stream-id, below the stream in flight. Only the second says the stream was never
    processed: it goes again on a new origin connection and is answered, not 502."""
    with ScriptedOrigin(w.certs["chain"], w.certs["key"]) as origin:
        client, _ = mitm_client(w, origin)
        if not client:
            return
        authority = "localhost:%d" % origin.port
        try:
            sid = client.request("GET", authority, "/answer?goaway=twostep&case=goaway-twostep")
            client.wait([sid], 8)
            s = client.streams[sid]
            seen = body_json(bytes(s.data)) or {}
            check(s.status == "200" and seen.get("connection") == 2, "the stream is answered on a new origin connection after the second GOAWAY",
                  "status %s, reset %s, body %r; %s" % (s.status, s.reset, bytes(s.data)[:300], origin.describe()))
        finally:
            client.close()
    rows = w.busymate.rows("~u case=goaway-twostep", expect=1)
    check(len(rows) == 1 and rows[0].get("status") == 200, "its row is 200", row_summary(rows))


CASES = [
    ("client_fin_ends_connection", client_fin_ends_connection), ("client_fin_mid_stream", client_fin_mid_stream),
    ("bodyless_requests_one_frame", bodyless_requests_one_frame), ("origin_goaway_new_connection", origin_goaway_new_connection), ("origin_goaway_refuses_stream", origin_goaway_refuses_stream),
    ("origin_goaway_queued_stream", origin_goaway_queued_stream), ("origin_goaway_two_steps", origin_goaway_two_steps),
]
