#!/usr/bin/env python3
"""Sends raw bytes to a proxy and prints what comes back, for the hostile
client tests.

usage: raw.py PORT HEX_REQUEST|@FILE [TIMEOUT [SPLITS]]
HEX_REQUEST is the request as hex (any bytes, CR and LF included), or @FILE
a file holding the request's bytes (for large ones). SPLITS, byte offsets
joined by commas, sends the request in pieces cut there, 100 ms apart (each
its own TCP segment). Prints
one JSON object: status (the first status line's code, or null), the
response bytes as text, and whether the proxy closed or the timeout hit.
"""
import json, socket, sys, time

port = int(sys.argv[1])
if sys.argv[2].startswith("@"):
    with open(sys.argv[2][1:], "rb") as f:
        request = f.read()
else:
    request = bytes.fromhex(sys.argv[2])
timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
splits = [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 and sys.argv[4] else []
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.settimeout(timeout)
try:
    start = 0
    for cut in splits + [len(request)]:
        s.sendall(request[start:cut])
        start = cut
        if cut < len(request):
            time.sleep(0.1)
except OSError:
    pass  # the proxy may answer and close before it has read everything
data, closed, timed_out = b"", False, False
deadline = time.monotonic() + timeout
while True:
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        timed_out = True
        break
    except ConnectionResetError:
        closed = True
        break
    if not chunk:
        closed = True
        break
    data += chunk
    # One whole response with Content-Length is enough.
    head, sep, body = data.partition(b"\r\n\r\n")
    if sep:
        length = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        if length and len(body) >= int(length[0].split(b":")[1]):
            break
status = None
if data.startswith(b"HTTP/1."):
    try:
        status = int(data.split(b" ", 2)[1])
    except ValueError:
        pass
print(json.dumps({"status": status, "text": data.decode("utf-8", "replace"), "closed": closed, "timed_out": timed_out}))
