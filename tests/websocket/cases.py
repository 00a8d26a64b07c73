"""The WebSocket suite's cases: each opens sockets with the Python
websockets library through Busymate and asserts what the client saw and
what Busymate stored (`list --json`, `show --messages --json`)."""
import base64, json, os, socket, ssl, subprocess, sys, threading, time

from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h2"))
from harness import check, rss_kb, wait_until  # noqa: E402


def open_socket(w, path, tls=False, deflate=True, **kwargs):
    """A socket to the origin through Busymate's proxy port (CONNECT, as the library does)."""
    name = ("tls" if tls else "plain") + ("" if deflate else "_raw")
    uri = "%s://localhost:%d%s" % ("wss" if tls else "ws", w.origins[name], path)
    context = None
    if tls:
        context = ssl.create_default_context(cafile=w.busymate.ca)
    return connect(uri, proxy="http://127.0.0.1:%d" % w.proxy, ssl=context, compression="deflate" if deflate else None,
                   open_timeout=15, close_timeout=10, max_size=None, **kwargs)


def socket_row(w, tag, state=None, timeout=15):
    """The handshake's `list --json` row for the socket tagged `tag`, once stored (and in `state`)."""
    def get():
        rows = w.busymate.rows("~websocket & ~u %s" % tag, timeout=0.5)
        row = rows[0] if rows else None
        if row and (state is None or (row.get("websocket") or {}).get("state") == state):
            return row
        return None
    return wait_until(get, timeout, 0.2)


def messages(w, row_id):
    r = w.busymate.cli("show", "--messages", "--json", str(row_id))
    if r.returncode != 0:
        return None, r.stderr
    return json.loads(r.stdout), None


def payload(m):
    return m["text"].encode() if "text" in m else base64.b64decode(m["base64"] or "")


def echo(w, name, tls, deflate):
    tag = "case=" + name
    sent = ["hello, busymate " * 4, b"\x00\x01\x02binary\xff" * 100, "ünïcödé ✓", json.dumps({"b": 1, "a": [1.0, 2]}), b"z" * (200 << 10)]
    with open_socket(w, "/echo?" + tag, tls=tls, deflate=deflate) as ws:
        got = []
        for message in sent:
            ws.send(message)
            got.append(ws.recv(timeout=15))
        check(got == sent, "every message came back as sent", [repr(g)[:80] for g in got])
        row = socket_row(w, tag, state="open")
        check(row is not None and row["status"] == 101, "the handshake's row is stored at the 101, the socket open", row)
        if row:
            check(row["websocket"]["messages_up"] + row["websocket"]["messages_down"] >= 2, "an open socket's row counts its messages so far", row["websocket"])
    row = socket_row(w, tag, state="closed")
    check(row is not None, "the row says the socket closed", row)
    if not row:
        return
    s = row["websocket"]
    check(s["closed_by"] == "client" and s["close_code"] == 1000, "the client closed it (1000)", s)
    check(s["messages_up"] == len(sent) and s["messages_down"] == len(sent), "5 messages counted each way", s)
    check(row["tls"] == ("mitm" if tls else "none"), "the row's TLS mode", row["tls"])
    check(("permessage-deflate" in (s["extensions"] or "")) == deflate, "the negotiated extensions are recorded", s["extensions"])
    detail, error = messages(w, row["id"])
    check(detail is not None, "show --messages --json reads them", error)
    if not detail:
        return
    listed = detail["messages"]
    check([m["seq"] for m in listed] == list(range(1, 2 * len(sent) + 1)), "messages numbered in order", [m["seq"] for m in listed])
    up = [m for m in listed if m["from"] == "client"]
    down = [m for m in listed if m["from"] == "server"]
    expected = [m if isinstance(m, bytes) else m.encode() for m in sent]
    check([payload(m) for m in up] == expected, "each client message stored as sent (inflated when compressed)", [m.get("length") for m in up])
    check([payload(m) for m in down] == expected, "each server message stored as sent", [m.get("length") for m in down])
    check([m["type"] for m in up] == ["text", "binary", "text", "text", "binary"], "text and binary kept apart", [m["type"] for m in up])
    check(all(m["compressed"] == deflate for m in listed), "compressed as the sockets negotiated", [m["compressed"] for m in listed])
    if deflate:
        big = up[-1]
        check(big["wire_length"] < big["length"] // 10, "a compressed message's wire length is its compressed size", big)
    text = w.busymate.cli("show", "--messages", "--no-pager", str(row["id"])).stdout
    check("→" in text and "←" in text and '  "a": [' in text, "show --messages prints arrows and JSON pretty-printed from its bytes", text[:600])


def plain(w):
    echo(w, "plain", tls=False, deflate=False)


def plain_deflate(w):
    echo(w, "plain_deflate", tls=False, deflate=True)
    # The export writes the messages as Chrome DevTools does, in a valid HAR 1.2 file.
    path = os.path.join(w.base, "ws.har")
    r = w.busymate.cli("export", "--har", path, "~u case=plain_deflate")
    entries = json.load(open(path))["log"]["entries"] if r.returncode == 0 else []
    listed = entries[0].get("_webSocketMessages", []) if entries else []
    check([(m["type"], m["opcode"]) for m in listed[:2]] == [("send", 1), ("receive", 1)] and len(listed) == 10,
          "export --har writes the socket's messages (_webSocketMessages)", r.stderr or [(m["type"], m["opcode"]) for m in listed])
    check(len(listed) > 2 and base64.b64decode(listed[2]["data"]) == b"\x00\x01\x02binary\xff" * 100,
          "a binary message is base64, as Chrome writes it", listed[2:3])
    valid = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "har", "validate.py"), path],
                           capture_output=True, text=True)
    check(valid.returncode == 0, "the file is valid HAR 1.2", valid.stdout[-500:])


def mitm(w):
    echo(w, "mitm", tls=True, deflate=False)


def mitm_deflate(w):
    echo(w, "mitm_deflate", tls=True, deflate=True)


def fragments(w):
    tag = "case=fragments"
    with open_socket(w, "/fragments?" + tag, deflate=True) as ws:
        first, second = ws.recv(timeout=10), ws.recv(timeout=10)
        check(first == "one two three" and second == b"\x01\x02\x03\x04", "fragmented messages reach the client whole", (first, second))
        ws.send(["up ", "in ", "pieces"])
        check(ws.recv(timeout=10) == "up in pieces", "a fragmented client message is echoed")
    row = socket_row(w, tag, state="closed")
    detail, _ = messages(w, row["id"]) if row else (None, None)
    listed = detail["messages"] if detail else []
    # The library sends each fragment, then an empty frame with FIN.
    check([(m["from"], m["frames"], payload(m)) for m in listed[:3]] == [
        ("server", 4, b"one two three"), ("server", 3, b"\x01\x02\x03\x04"), ("client", 4, b"up in pieces")],
        "each message reassembled from its fragments, its frames counted", [(m["from"], m["frames"], m.get("length")) for m in listed])


def close_from_server(w):
    tag = "case=close_server"
    with open_socket(w, "/close-server?" + tag, deflate=False) as ws:
        got = [ws.recv(timeout=10), ws.recv(timeout=10)]
        try:
            ws.recv(timeout=10)
            closed = None
        except ConnectionClosed as e:
            closed = e.rcvd
    check(got == ["first from the server", b"\x00\x01second, binary"], "the server's messages arrive", got)
    check(closed is not None and closed.code == 4001 and closed.reason == "server done", "the server's close frame reaches the client as sent", closed)
    row = socket_row(w, tag, state="closed")
    s = row["websocket"] if row else {}
    check(s.get("closed_by") == "server" and s.get("close_code") == 4001 and s.get("close_reason") == "server done",
          "the row: closed by the server, 4001 'server done'", s)
    # ~bs finds the server's words, ~bq does not; ~b either way.
    found = lambda f: [r["id"] for r in w.busymate.rows("%s & ~u %s" % (f, tag), timeout=0.5)]
    check(found("~bs 'first from'") == [row["id"]] and found("~bq 'first from'") == [] and found("~b 'second, binary'") == [row["id"]],
          "~bs and ~bq search each direction's messages", (found("~bs 'first from'"), found("~bq 'first from'")))


def close_from_client(w):
    tag = "case=close_client"
    with open_socket(w, "/echo?" + tag, deflate=True) as ws:
        ws.send("bye soon")
        ws.recv(timeout=10)
        ws.close(4002, "client done")
    row = socket_row(w, tag, state="closed")
    s = row["websocket"] if row else {}
    check(s.get("closed_by") == "client" and s.get("close_code") == 4002 and s.get("close_reason") == "client done",
          "the row: closed by the client, 4002 'client done'", s)
    check(row and row.get("duration_ms") is not None, "the row's end comes at the close", row)


def stalled_reader(w):
    """A client that never reads: the server's sends stall (backpressure through the proxy), memory stays bounded."""
    tag = "case=stalled"
    pid = w.busymate.tunnel_pid()
    before = rss_kb(pid)
    ws = open_socket(w, "/flood?n=200000&size=1024&" + tag, deflate=False, max_queue=1)
    try:
        time.sleep(6)
        peak = rss_kb(pid)
        row = socket_row(w, tag)
        stored = row["websocket"]["messages_down"] if row else -1
        check(0 <= stored < 150000, "with the client not reading, the server was held back (not all 200,000 messages passed)", stored)
        check(peak is not None and before is not None and peak - before < 100 * 1024, "the tunnel's memory stays bounded (under 100 MB more)",
              (before, peak))
        # Now read it all: every message arrives, in order, and is stored.
        count = 0
        try:
            while True:
                m = ws.recv(timeout=30)
                if m[:8] != "%08d" % count:
                    check(False, "messages arrive in order", (count, m[:8]))
                    break
                count += 1
        except ConnectionClosed:
            pass
        check(count == 200000, "once it reads, all 200,000 messages arrive", count)
    finally:
        ws.close()
    row = socket_row(w, tag, state="closed", timeout=60)
    check(row and row["websocket"]["messages_down"] == 200000, "all 200,000 messages are in the store", row and row["websocket"])


def sustained(w):
    """10,000 messages a second for a minute: every one arrives in order and is stored, the tunnel's memory flat."""
    tag = "case=sustained"
    rate, seconds = 10000, 60
    pid = w.busymate.tunnel_pid()
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.wait(5):
            samples.append(rss_kb(pid))
    sampler = threading.Thread(target=sample, daemon=True)
    ws = open_socket(w, "/paced?rate=%d&seconds=%d&size=256&%s" % (rate, seconds, tag), deflate=False)
    started = time.monotonic()
    sampler.start()
    count, in_order = 0, True
    try:
        while True:
            m = ws.recv(timeout=30)
            if in_order and m[:9] != "%09d" % count:
                in_order = False
            count += 1
    except ConnectionClosed:
        pass
    finally:
        elapsed = time.monotonic() - started
        stop.set()
        ws.close()
    check(count == rate * seconds and in_order, "all %d messages arrived, in order" % (rate * seconds), count)
    check(elapsed < seconds * 1.15, "at the sender's pace: %d messages a second" % int(count / max(elapsed, 0.001)), "%.1f s" % elapsed)
    # Flat: from the first sample (10 s in) to the last, less than 40 MB more.
    kept = [s for s in samples if s]
    check(len(kept) >= 3 and max(kept[1:]) - kept[1] < 40 * 1024, "the tunnel's memory stays flat (RSS, kB, every 5 s)", kept)
    row = socket_row(w, tag, state="closed", timeout=60)
    check(row and row["websocket"]["messages_down"] == rate * seconds, "every message is in the store", row and row["websocket"])


def deflate_bomb(w):
    tag = "case=bomb"
    pid = w.busymate.tunnel_pid()
    closed = None
    with open_socket(w, "/bomb?" + tag, deflate=True) as ws:
        try:
            ws.recv(timeout=15)
        except ConnectionClosed as e:
            closed = e.rcvd
    check(closed is not None and closed.code == 1009, "a message inflating past the limit ends the socket with 1009", closed)
    row = socket_row(w, tag, state="closed")
    check(row and "deflate bomb" in (row.get("error") or ""), "the row says why", row and row.get("error"))
    check(w.busymate.tunnel_pid() == pid, "the tunnel is the same process")
    with open_socket(w, "/echo?case=after_bomb", deflate=True) as ws:
        ws.send("still here")
        check(ws.recv(timeout=10) == "still here", "the next socket works")


def unmasked_client(w):
    """A client that sends an unmasked frame breaks RFC 6455: both sides get a close frame (1002)."""
    tag = "case=unmasked"
    sock = socket.create_connection(("127.0.0.1", w.proxy), timeout=10)
    port = w.origins["plain_raw"]
    sock.sendall(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (port, port))
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(4096)
    key = base64.b64encode(os.urandom(16))
    sock.sendall(b"GET /echo?" + tag.encode() + b" HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    check(head.startswith(b"HTTP/1.1 101"), "the handshake switched", head[:40])
    sock.sendall(b"\x81\x05hello")  # FIN, text, not masked
    data = head.split(b"\r\n\r\n", 1)[1]
    deadline = time.monotonic() + 10
    while len(data) < 4 and time.monotonic() < deadline:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    check(data[:1] == b"\x88" and int.from_bytes(data[2:4], "big") == 1002, "the client is sent a close frame, 1002", data[:40])
    row = socket_row(w, tag, state="closed")
    check(row and "unmasked" in (row.get("error") or ""), "the row says the client sent an unmasked frame", row and row.get("error"))


def tail_live(w):
    """`tail --messages` shows a message while its socket is open."""
    tag = "case=tail"
    process = subprocess.Popen([os.path.join(w.busymate.bin, "busymate"), "tail", "--messages", "--json", "--group", w.busymate.group, "~u " + tag],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append(l) for l in process.stdout], daemon=True)
    reader.start()
    try:
        time.sleep(1)
        with open_socket(w, "/echo?" + tag, deflate=True) as ws:
            ws.send("live message one")
            ws.recv(timeout=10)
            seen = wait_until(lambda: [json.loads(l) for l in lines if "live message one" in l], 10)
            check(seen and {m["from"] for m in seen} == {"client", "server"}, "tail --messages shows both directions while the socket is open", lines[:4])
        with open_socket(w, "/echo?case=not_tailed", deflate=True) as ws:
            ws.send("another socket")
            ws.recv(timeout=10)
        time.sleep(1.5)
        check(not any("another socket" in l for l in lines), "the filter keeps other sockets out", lines[-2:])
    finally:
        process.terminate()
        process.wait(10)


def chromium_live(w):
    import browser
    browser.chromium_live(w)


import held_cases  # noqa: E402  (after what it imports from here)

CASES = [("plain", plain), ("plain_deflate", plain_deflate), ("mitm", mitm), ("mitm_deflate", mitm_deflate), ("fragments", fragments),
         ("close_from_server", close_from_server), ("close_from_client", close_from_client), ("tail_live", tail_live),
         ("unmasked_client", unmasked_client), ("deflate_bomb", deflate_bomb), ("stalled_reader", stalled_reader), ("sustained", sustained),
         ("inject", held_cases.inject), ("breakpoint_messages", held_cases.breakpoint_messages), ("chromium_live", chromium_live),
         ("page_held", held_cases.page_held)]
