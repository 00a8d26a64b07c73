"""The HTTP/2 cases about versions: ALPN, HTTP/1.1 and HTTP/2 origins and
clients, proxy.http2, h2c, Upgrade: h2c, big and empty bodies. Each case is
a function of the World (run.py) and names its rows by a token in the URL."""
import hashlib, json, re, socket

import h2client
from harness import check, note, body_json, curl, wait_until
from origins import pattern


def odd(n):
    return isinstance(n, int) and n % 2 == 1


def row_summary(rows):
    return json.dumps([{k: r.get(k) for k in ("id", "url", "status", "http_version", "stream_id", "connection_id", "error")} for r in rows])[:1200]


def check_h2_rows(rows, what, count):
    check(len(rows) == count, "%s: %d rows stored" % (what, count), row_summary(rows))
    check(rows and all(r.get("http_version") == "HTTP/2.0" for r in rows), "%s: rows say http_version HTTP/2.0" % what, row_summary(rows))
    check(rows and all(odd(r.get("stream_id")) for r in rows), "%s: rows have an odd stream_id" % what, row_summary(rows))


def curl_h2(w):
    """curl --http2 with two URLs in one invocation: HTTP/2 both, one connection, two streams."""
    urls = [w.url("main_tls", "/echo?case=curl-h2-a"), w.url("main_tls", "/echo?case=curl-h2-b")]
    results, rc, log = curl(w.proxy, w.busymate.ca, urls, "--http2")
    check(rc == 0 and all(r["code"] == "200" for r in results), "curl --http2 gets 200 for both URLs", "rc %d %s %s" % (rc, results, log[-600:]))
    check(all(r["version"] == "2" for r in results), "curl -w %{http_version} says 2", [r["version"] for r in results])
    check("Re-using existing" in log, "curl reused its connection for the second URL (so both are one connection)", log[-600:])
    seen = [body_json(r["body"]) or {} for r in results]
    check(all(s.get("http_version") == "2" for s in seen), "the origin was reached over HTTP/2 (it chose h2 from the client's ALPN)", seen)
    rows = w.busymate.rows("~u case=curl-h2-", expect=2)
    check_h2_rows(rows, "curl --http2", 2)
    ids = {r.get("connection_id") for r in rows}
    check(len(rows) == 2 and len(ids) == 1 and None not in ids, "both rows have the same connection_id", row_summary(rows))
    check(len({r.get("stream_id") for r in rows}) == 2, "the two rows have different stream_ids", row_summary(rows))
    by_filter, error = w.busymate.select("~proto h2 & ~u case=curl-h2-")
    check(by_filter and len(by_filter) == 2, "`list '~proto h2'` selects them", error or row_summary(by_filter))
    none, error = w.busymate.select("~proto h1 & ~u case=curl-h2-")
    check(none == [], "`list '~proto h1'` does not", error or row_summary(none))


def h1_origin(w):
    """curl --http2 (h2,http/1.1) in front of an HTTP/1.1-only origin. ALPN is eager (docs/usage.md, HTTP/2 and gRPC):
    the origin chose http/1.1, so the client is offered http/1.1 and both legs speak it; bodies cross intact.
    A client that offers h2 alone keeps it and is translated (its first stream rides the eager connection)."""
    body = pattern(100000)
    with open(w.base + "/h1-body", "wb") as f:
        f.write(body)
    urls = [w.url("h1only_tls", "/echo?case=h1-origin-a"), w.url("h1only_tls", "/echo?case=h1-origin-b")]
    results, rc, log = curl(w.proxy, w.busymate.ca, urls, "--http2", "--data-binary", "@" + w.base + "/h1-body")
    check(rc == 0 and all(r["code"] == "200" for r in results), "curl --http2 to an HTTP/1.1-only origin gets 200 twice", "rc %d %s" % (rc, log[-600:]))
    check(all(r["version"] == "1.1" for r in results), "the client speaks HTTP/1.1, what the origin chose (eager ALPN)",
          "curl spoke %s" % [r["version"] for r in results])
    seen = [body_json(r["body"]) or {} for r in results]
    check(all(s.get("http_version") == "HTTP/1.1" and s.get("method") == "POST" for s in seen), "the origin got both POSTs over HTTP/1.1",
          [(s.get("http_version"), s.get("method")) for s in seen])
    check(all(s.get("body_sha256") == hashlib.sha256(body).hexdigest() for s in seen), "the 100 KB request bodies reached the origin intact",
          [s.get("body_size") for s in seen])
    rows = w.busymate.rows("~u case=h1-origin-", expect=2)
    check(len(rows) == 2 and all(r.get("http_version") == "HTTP/1.1" and r.get("stream_id") is None for r in rows),
          "two rows say HTTP/1.1, no stream_id", row_summary(rows))
    by_filter, error = w.busymate.select("~proto h1 & ~u case=h1-origin-")
    check(by_filter and len(by_filter) == 2, "`list '~proto h1'` selects them (the client's version)", error or row_summary(by_filter))
    # h2 alone: the client keeps HTTP/2 and Busymate translates.
    sock, alpn = h2client.open_mitm(w.proxy, "localhost", w.origins["h1only_tls"], w.busymate.ca, alpn=("h2",))
    check(alpn == "h2", "a client offering h2 alone is offered h2 in front of the HTTP/1.1-only origin", "ALPN %r" % alpn)
    if alpn != "h2":
        sock.close()
        return
    client = h2client.H2Client(sock)
    try:
        authority = "localhost:%d" % w.origins["h1only_tls"]
        # One DATA frame (the h2 library neither splits frames nor waits for window).
        small = body[:16000]
        sid = client.request("POST", authority, "/echo?case=h1-origin-h2only", body=small)
        client.wait([sid], 15)
        seen = body_json(bytes(client.streams[sid].data)) or {}
        check(client.streams[sid].status == "200" and seen.get("http_version") == "HTTP/1.1"
              and seen.get("body_sha256") == hashlib.sha256(small).hexdigest(),
              "its stream reached the origin over HTTP/1.1 with the 16 KB body intact",
              "status %s, origin %s" % (client.streams[sid].status, {k: seen.get(k) for k in ("http_version", "body_size")}))
    finally:
        client.close()
    check_h2_rows(w.busymate.rows("~u case=h1-origin-h2only"), "h2-alone client, HTTP/1.1 origin", 1)


def h1_client(w):
    """An HTTP/1.1 client (curl --http1.1) to the h2-capable origin: HTTP/1.1 on both legs, no stream id."""
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=h1-client")], "--http1.1")
    seen = body_json(results[0]["body"]) or {}
    check(results[0]["code"] == "200" and results[0]["version"] == "1.1" and seen.get("http_version") == "1.1",
          "curl --http1.1 gets HTTP/1.1, and so does the origin", "%s %s, origin %s" % (results[0]["code"], results[0]["version"], seen.get("http_version")))
    rows = w.busymate.rows("~u case=h1-client")
    check(len(rows) == 1 and rows[0].get("http_version") == "HTTP/1.1" and rows[0].get("stream_id") is None and rows[0].get("connection_id"),
          "the row says HTTP/1.1, no stream_id, a connection_id", row_summary(rows))
    by_filter, error = w.busymate.select("~proto h1 & ~u case=h1-client")
    check(by_filter and len(by_filter) == 1, "`list '~proto h1'` selects it", error or row_summary(by_filter))


def h2_origin(w):
    """An origin that speaks only HTTP/2 (its ALPN is h2 alone)."""
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("h2only_tls", "/echo?case=h2-origin")], "--http2", "--data-binary", "to the h2-only origin")
    r = results[0]
    seen = body_json(r["body"]) or {}
    check(rc == 0 and r["code"] == "200" and r["version"] == "2", "curl --http2 to an HTTP/2-only origin gets 200 over HTTP/2",
          "rc %d, %s %s: %s" % (rc, r["code"], r["version"], log[-600:]))
    check(seen.get("body") == "to the h2-only origin", "the origin got the body", seen)
    check_h2_rows(w.busymate.rows("~u case=h2-origin"), "h2-only origin", 1)


def http2_off(w):
    """proxy.http2 false: only http/1.1 is offered, to the client and to the origin."""
    w.busymate.write_settings({"http2": False})
    try:
        w.busymate.wait_applied()
    except RuntimeError as e:
        check(False, "the tunnel applies proxy.http2: false", e)
        w.busymate.write_settings()
        w.busymate.wait_applied()
        return
    try:
        results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=http2-off")], "--http2")
        r = results[0]
        seen = body_json(r["body"]) or {}
        check(rc == 0 and r["code"] == "200" and r["version"] == "1.1", "curl --http2 gets HTTP/1.1 with proxy.http2 false",
              "rc %d, %s %s" % (rc, r["code"], r["version"]))
        check(seen.get("http_version") == "1.1", "the origin was offered http/1.1 only", seen.get("http_version"))
        rows = w.busymate.rows("~u case=http2-off")
        check(len(rows) == 1 and rows[0].get("http_version") == "HTTP/1.1", "the row says HTTP/1.1", row_summary(rows))
    finally:
        w.busymate.write_settings()
        w.busymate.wait_applied()
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=http2-on-again")], "--http2")
    check(results[0]["version"] == "2", "HTTP/2 again once the setting is removed", results[0]["version"])


def h2c_proxy_port(w):
    """h2c prior knowledge: the preface straight to the explicit proxy port, :scheme http, :authority the origin."""
    authority = "localhost:%d" % w.origins["main_plain"]
    client = h2client.H2Client(socket.create_connection(("127.0.0.1", w.proxy), timeout=10), scheme="http")
    try:
        sid = client.request("GET", authority, "/echo?case=h2c-pk")
        client.wait([sid], 15)
        s = client.streams[sid]
        seen = body_json(bytes(s.data)) or {}
        check(s.status == "200" and seen.get("path") == "/echo?case=h2c-pk", "an h2c request on the proxy port is answered by the origin",
              "status %s, reset %s, goaway %s, closed %s, body %r" % (s.status, s.reset, client.goaway, client.closed, bytes(s.data)[:200]))
    finally:
        client.close()
    check_h2_rows(w.busymate.rows("~u case=h2c-pk"), "h2c on the proxy port", 1)
    # What curl does with the flag through a proxy: it says it ignores it and sends HTTP/1.1.
    results, rc, log = curl(w.proxy, None, ["http://%s/echo?case=h2c-curl-ignored" % authority], "--http2-prior-knowledge")
    check(results[0]["code"] == "200", "curl --http2-prior-knowledge -x (which curl sends as HTTP/1.1) is answered", log[-400:])
    note("curl %s prior knowledge through a proxy: it spoke %s" % ("ignores" if "Ignoring HTTP/2 prior knowledge" in log else "uses", results[0]["version"]))


def tunnel_row(w, target):
    """The passed-through CONNECT's row (written once both sides closed)."""
    found = lambda: [r for r in w.busymate.rows("~m CONNECT", timeout=0) if r.get("url") == target]
    rows = wait_until(found, 15, 0.25)
    return rows[0] if rows else None


def h2c_in_connect(w):
    """curl --http2-prior-knowledge --proxytunnel: CONNECT to a plaintext origin, then h2c inside the tunnel.
    To 127.0.0.1 (not on the SSL-proxying list) the tunnel is passed through, bytes untouched. To
    localhost (on the list) the tunnel's first bytes are not TLS: the call must still be answered
    (mitmproxy reads plaintext in a CONNECT as HTTP); its row is then an HTTP/2.0 exchange, or the
    tunnel's own row without an error."""
    port = w.origins["main_plain"]
    results, rc, log = curl(w.proxy, None, ["http://127.0.0.1:%d/echo?case=h2c-connect-passed" % port], "--http2-prior-knowledge", "--proxytunnel")
    r = results[0]
    seen = body_json(r["body"]) or {}
    check(rc == 0 and r["code"] == "200" and r["version"] == "2" and seen.get("http_version") == "2",
          "h2c in a passed-through CONNECT is answered over HTTP/2 end to end", "rc %d, %s %s, %s" % (rc, r["code"], r["version"], log[-500:]))
    row = tunnel_row(w, "127.0.0.1:%d" % port)
    check(row and row.get("tls") == "passthrough" and not row.get("error"), "the passed-through tunnel's row has no error",
          row_summary([row] if row else []))
    results, rc, log = curl(w.proxy, None, ["http://localhost:%d/echo?case=h2c-connect" % port], "--http2-prior-knowledge", "--proxytunnel")
    r = results[0]
    seen = body_json(r["body"]) or {}
    check(rc == 0 and r["code"] == "200" and r["version"] == "2" and seen.get("http_version") == "2",
          "h2c in a CONNECT to an intercepted host is answered over HTTP/2", "rc %d, %s %s, %s" % (rc, r["code"], r["version"], log[-500:]))
    rows = w.busymate.rows("~u case=h2c-connect$", timeout=3)
    tunnel = tunnel_row(w, "localhost:%d" % port)
    if rows:
        check_h2_rows(rows, "h2c in a CONNECT, read as HTTP", 1)
    else:
        check(tunnel and not tunnel.get("error"), "h2c in a CONNECT to an intercepted host: an HTTP/2.0 row, or the tunnel's row without an error",
              row_summary([tunnel] if tunnel else []))


def upgrade_h2c(w):
    """`Upgrade: h2c` over HTTP/1.1 is stripped: the origin never sees it, the client gets a plain 200."""
    url = "http://localhost:%d/echo?case=upgrade-h2c" % w.origins["h1only_plain"]
    results, rc, log = curl(w.proxy, None, [url], "--http1.1", "-H", "Connection: Upgrade, HTTP2-Settings", "-H", "Upgrade: h2c",
                            "-H", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
    r = results[0]
    seen = body_json(r["body"]) or {}
    names = {n for n, v in seen.get("headers", [])}
    check(r["code"] == "200" and r["version"] == "1.1", "the client gets a 200 over HTTP/1.1 (no 101)", "%s %s %s" % (r["code"], r["version"], log[-400:]))
    check(seen and "upgrade" not in names and "http2-settings" not in names, "the origin saw no Upgrade: h2c (nor HTTP2-Settings)", seen.get("headers"))
    rows = w.busymate.rows("~u case=upgrade-h2c")
    check(len(rows) == 1 and rows[0].get("status") == 200, "the row is stored with status 200", row_summary(rows))


def bodies(w):
    """A 300 KB response and an empty 200 over HTTP/2."""
    urls = [w.url("main_tls", "/big?size=300000&case=body-big"), w.url("main_tls", "/empty?case=body-empty")]
    results, rc, log = curl(w.proxy, w.busymate.ca, urls, "--http2")
    check(results[0]["code"] == "200" and results[0]["body"] == pattern(300000), "the 300 KB body arrives whole over HTTP/2",
          "%s %s, %d bytes" % (results[0]["code"], results[0]["version"], len(results[0]["body"])))
    check(results[1]["code"] == "200" and results[1]["body"] == b"", "the empty 200 arrives", "%s %r %s" % (results[1]["code"], results[1]["body"][:100], log[-300:]))
    check(all(r["version"] == "2" for r in results), "both over HTTP/2", [r["version"] for r in results])
    rows = w.busymate.rows("~u case=body-", expect=2)
    sizes = {("big" if "big" in r["url"] else "empty"): r.get("response_size") for r in rows}
    check(sizes == {"big": 300000, "empty": 0}, "the rows record 300000 and 0 response bytes", row_summary(rows))


def nghttp_h2load(w):
    """Debian's nghttp and h2load, h2c prior knowledge to the proxy port, :authority naming the origin."""
    import shutil, subprocess
    if not check(shutil.which("nghttp") and shutil.which("h2load"), "nghttp and h2load are installed (nghttp2-client)", "missing"):
        return
    authority = "localhost:%d" % w.origins["main_plain"]
    proxy = "http://127.0.0.1:%d" % w.proxy
    r = subprocess.run(["nghttp", "-t", "15", "-H", ":authority: " + authority, proxy + "/echo?case=nghttp-h2c"], capture_output=True, text=True, timeout=30)
    seen = body_json(r.stdout.encode()) or {}
    # nghttp speaks only HTTP/2; a plaintext origin may be reached over HTTP/1.1 (h2c toward an unknown origin is a guess).
    check(r.returncode == 0 and seen.get("path") == "/echo?case=nghttp-h2c",
          "nghttp (h2c prior knowledge) through the proxy port is answered by the origin", "rc %d %r %s" % (r.returncode, r.stdout[:300], r.stderr[-300:]))
    note("h2c on the proxy port: the plaintext origin was reached over HTTP/%s" % seen.get("http_version"))
    check_h2_rows(w.busymate.rows("~u case=nghttp-h2c"), "nghttp", 1)
    r = subprocess.run(["h2load", "-n", "400", "-c", "2", "-m", "20", "-T", "20", "-H", ":authority: " + authority, proxy + "/echo?case=h2load"],
                       capture_output=True, text=True, timeout=60)
    done = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded", r.stdout)
    codes = re.search(r"status codes: (\d+) 2xx", r.stdout)
    check(done and done.group(2) == "400" and codes and codes.group(1) == "400", "h2load: 400 requests on 2 connections, 20 streams each, all 2xx",
          r.stdout[-600:] + r.stderr[-300:])
    rows = w.busymate.rows("~u case=h2load$", expect=400, timeout=15)
    check(len(rows) == 400 and all(r.get("http_version") == "HTTP/2.0" for r in rows), "400 HTTP/2.0 rows", "%d rows" % len(rows))
    check(len({r.get("connection_id") for r in rows}) == 2 and None not in {r.get("connection_id") for r in rows},
          "the rows name 2 connections", sorted({str(r.get("connection_id")) for r in rows})[:5])


CASES = [
    ("curl_h2", curl_h2), ("h1_only_origin", h1_origin), ("h1_client", h1_client), ("h2_only_origin", h2_origin), ("bodies", bodies),
    ("http2_setting_off", http2_off), ("h2c_proxy_port", h2c_proxy_port), ("nghttp_h2load_h2c", nghttp_h2load), ("h2c_in_connect", h2c_in_connect),
    ("upgrade_h2c_stripped", upgrade_h2c),
]
