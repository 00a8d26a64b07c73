"""gRPC through Busymate: grpcio's client (a process per call, proxied by
its `grpc.http_proxy` channel option, which sends CONNECT) against grpcio's
server, over TLS through the MITM (the client trusts only the Busymate CA)
and plaintext h2c."""
import json, os, subprocess, sys

from harness import HERE, check, note, wait_until

PEER = os.path.join(HERE, "grpc_peer.py")


def call(w, case, service, tls=True, proxied=True, target="localhost", **extra):
    port = w.grpc["tls" if tls else "plain"]
    command = [sys.executable, PEER, "call", "--target", "%s:%d" % (target, port), "--case", case, "--service", service]
    if tls:
        command += ["--ca", w.busymate.ca if proxied else w.certs["ca"]]
    if proxied:
        command += ["--proxy", "http://127.0.0.1:%d" % w.proxy]
    for name, value in extra.items():
        command += ["--" + name, str(value)]
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "grpc_proxy", "no_proxy", "no_grpc_proxy")}
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=150, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "client timed out after 150 s"}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "client failed: rc %d %s" % (r.returncode, r.stderr[-800:])}


def stored(w, service, method):
    """The row of /service/method and its show --json."""
    rows = w.busymate.rows("~u /%s/%s" % (service.replace(".", "\\."), method))
    if not rows:
        check(False, "a row for /%s/%s is stored" % (service, method), "none")
        return None, {}
    return rows[0], w.busymate.show(rows[0]["id"])


def check_row(w, service, method, grpc_status="0"):
    row, detail = stored(w, service, method)
    if row is None:
        return None
    check(row.get("http_version") == "HTTP/2.0" and row.get("status") == 200, "the row is HTTP/2.0, status 200",
          {k: row.get(k) for k in ("http_version", "status", "error", "stream_id")})
    trailers = (detail.get("response") or {}).get("trailers") or []
    check(["grpc-status", grpc_status] in trailers, "the row's response.trailers has grpc-status %s" % grpc_status, trailers)
    check(str(row.get("request_content_type") or "").startswith("application/grpc"), "the row's request content type is application/grpc",
          row.get("request_content_type"))
    return detail


def unary(w):
    out = call(w, "unary", "bm.Unary")
    check(out.get("status") == "OK" and out.get("messages") == ["echo:hello"], "a unary call through the MITM is answered", out)
    detail = check_row(w, "bm.Unary", "Unary")
    by_filter, error = w.busymate.select("~grpc & ~u /bm\\.Unary/")
    check(by_filter and len(by_filter) == 1, "`list '~grpc'` selects the call", error or by_filter)
    none, error = w.busymate.select("~grpc & ~u case=curl-h2-")
    check(none == [], "`list '~grpc'` leaves out a plain HTTP/2 request", error or none)
    check(detail and detail.get("grpc") is not None, "`show --json` has a grpc member for the call", sorted((detail or {}).keys()))


def server_stream(w):
    out = call(w, "server_stream", "bm.ServerStream", count=50)
    check(out.get("status") == "OK" and out.get("messages") == ["item %d" % i for i in range(50)], "a server-streaming call gets its 50 messages",
          str(out)[:600])
    check_row(w, "bm.ServerStream", "ServerStream")


def client_stream(w):
    out = call(w, "client_stream", "bm.ClientStream", count=50)
    expected = "got 50: " + ",".join("m%d" % i for i in range(50))
    check(out.get("status") == "OK" and out.get("messages") == [expected], "a client-streaming call's 50 messages reach the server", str(out)[:600])
    check_row(w, "bm.ClientStream", "ClientStream")


def bidi(w):
    """A ping-pong of 1,000 messages on one bidirectional call: each ping waits for the last pong,
    so a proxy that buffers the stream stalls it (mitmproxy #7567)."""
    direct = call(w, "bidi", "bm.BidiDirect", proxied=False, count=1000)
    through = call(w, "bidi", "bm.Bidi", count=1000)
    check(direct.get("status") == "OK" and direct.get("round_trips") == 1000, "direct: 1,000 round trips", direct)
    check(through.get("status") == "OK" and through.get("round_trips") == 1000 and through.get("wrong") == 0,
          "through Busymate: 1,000 round trips, each pong the answer to its ping", through)
    if direct.get("us_per_round_trip") and through.get("us_per_round_trip"):
        note("bidi ping-pong: %.0f µs per round trip direct, %.0f µs through Busymate (+%.0f µs)" % (
            direct["us_per_round_trip"], through["us_per_round_trip"], through["us_per_round_trip"] - direct["us_per_round_trip"]))
    check_row(w, "bm.Bidi", "Bidi")


def trailers_only(w):
    """An error status in a trailers-only reply (one HEADERS frame with END_STREAM): the client gets the
    origin's status and message, not INTERNAL (split into HEADERS and an empty DATA frame, it would)."""
    out = call(w, "notfound", "bm.TrailersOnly")
    check(out.get("status") == "StatusCode.NOT_FOUND" and out.get("details") == "no such thing",
          "the client gets NOT_FOUND and its message through the MITM", out)
    row, detail = stored(w, "bm.TrailersOnly", "Unary")
    if row is not None:
        grpc = detail.get("grpc") or {}
        check(str(grpc.get("status")) == "5", "the row's gRPC status is 5 (NOT_FOUND)", grpc)


def empty(w):
    """An empty response message (mitmproxy #5890 asserted on it)."""
    out = call(w, "empty", "bm.Empty")
    check(out.get("status") == "OK" and out.get("size") == 0, "an empty response reaches the client", out)
    check_row(w, "bm.Empty", "Unary")


def big(w):
    """A response message over 65 KB (mitmproxy #5428 corrupted it)."""
    out = call(w, "big", "bm.Big", size=300000)
    check(out.get("status") == "OK" and out.get("intact") is True and out.get("size") == 300000, "a 300 KB response arrives intact", out)
    check_row(w, "bm.Big", "Unary")


def plaintext(w):
    """Plaintext h2c gRPC through the explicit proxy: grpcio sends CONNECT, then h2c inside the tunnel.
    To 127.0.0.1 (not on the SSL-proxying list) the tunnel is passed through; to localhost (on the
    list) the call must still be answered (mitmproxy reads plaintext in a CONNECT as HTTP), and its
    row is an HTTP/2.0 exchange with grpc-status, or the tunnel's own row without an error."""
    out = call(w, "unary", "bm.PlainPassed", tls=False, target="127.0.0.1")
    check(out.get("status") == "OK" and out.get("messages") == ["echo:hello"], "a plaintext call through a passed-through CONNECT is answered", out)
    out = call(w, "unary", "bm.Plain", tls=False)
    check(out.get("status") == "OK" and out.get("messages") == ["echo:hello"], "a plaintext call through a CONNECT to an intercepted host is answered", out)
    if w.busymate.rows("~u /bm\\.Plain/", timeout=3):
        check_row(w, "bm.Plain", "Unary")
    else:
        target = "localhost:%d" % w.grpc["plain"]
        rows = wait_until(lambda: [r for r in w.busymate.rows("~m CONNECT", timeout=0) if r.get("url") == target], 15, 0.25) or []
        check(rows and not rows[0].get("error"), "its row: an HTTP/2.0 exchange, or the tunnel's row without an error",
              [{k: r.get(k) for k in ("url", "tls", "error")} for r in rows])


def descriptor_set(w):
    """Field names from a FileDescriptorSet: a call captured through the MITM is shown by field number, then, once
    grpc.descriptor_sets names what protoc made of echo.proto, by name (show and show --json); a file that is not
    there is named in one line and the call is shown by number again."""
    out = call(w, "unary", "bm.Named")
    check(out.get("status") == "OK" and out.get("messages") == ["echo:hello"], "a unary call to bm.Named through the MITM is answered", out)
    row, _ = stored(w, "bm.Named", "Unary")
    if row is None:
        return
    pb = os.path.join(w.busymate.group, "echo.pb")
    made = subprocess.run(["protoc", "--include_imports", "-I", HERE, "-o", pb, os.path.join(HERE, "echo.proto")], capture_output=True, text=True)
    check(made.returncode == 0, "protoc makes the descriptor set", made.stderr[-400:])

    def shown():
        return w.busymate.cli("show", "--no-pager", str(row["id"])).stdout

    def request_fields(detail):
        messages = ((detail.get("grpc") or {}).get("request") or {}).get("messages") or [{}]
        return messages[0].get("fields") or []

    text = shown()
    check('    1: "hello"' in text and "text (1)" not in text, "without grpc.descriptor_sets, show gives field numbers", text[:900])
    try:
        w.busymate.write_settings(grpc={"descriptor_sets": ["echo.pb"]})
        text = shown()
        check("request: 1 message · bm.EchoRequest" in text and '    text (1): "hello"' in text and '    reply (1): "echo:hello"' in text,
              "with it (a path relative to the group directory), show names the request's and the response's fields", text[:900])
        detail = w.busymate.show(row["id"])
        fields = request_fields(detail)
        check([(f.get("number"), f.get("name"), f.get("proto_type"), f.get("type"), f.get("value")) for f in fields] == [(1, "text", "string", "string", "hello")]
              and detail["grpc"]["request"].get("message_type") == "bm.EchoRequest",
              "show --json gives each field's name and declared type beside its number", fields)
        w.busymate.write_settings(grpc={"descriptor_sets": ["missing.pb"]})
        text = shown()
        check("(descriptor set missing.pb: no such file; its fields are shown by number)" in text and '    1: "hello"' in text,
              "a descriptor set that is not there is named in one line, and the fields are shown by number", text[:900])
    finally:
        w.busymate.write_settings()
        w.busymate.wait_applied()


CASES = [
    ("grpc_unary", unary), ("grpc_server_stream", server_stream), ("grpc_client_stream", client_stream),
    ("grpc_bidi_pingpong", bidi), ("grpc_empty_response", empty), ("grpc_big_response", big), ("grpc_plaintext_h2c", plaintext),
    ("grpc_trailers_only", trailers_only), ("grpc_descriptor_set", descriptor_set),
]
