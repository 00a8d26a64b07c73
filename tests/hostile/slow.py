#!/usr/bin/env python3
"""Slow and silent clients for the timeout tests.

usage: slow.py PORT HEX_REQUEST DRIP_SECONDS [LIMIT_SECONDS] [--tls-connect HOST:PORT]
Sends HEX_REQUEST one byte per DRIP_SECONDS (0: all at once), then waits
for the proxy, at most LIMIT_SECONDS (default 20). With --tls-connect it
first opens a CONNECT tunnel to HOST:PORT and then sends nothing (a client
that never starts its TLS handshake). Prints one JSON object: what came
back, whether the proxy closed, and after how many seconds.
"""
import json, socket, sys, time

port, request, drip = int(sys.argv[1]), bytes.fromhex(sys.argv[2]), float(sys.argv[3])
limit = float(sys.argv[4]) if len(sys.argv) > 4 and not sys.argv[4].startswith("--") else 20.0
tls_connect = sys.argv[sys.argv.index("--tls-connect") + 1] if "--tls-connect" in sys.argv else None
start = time.monotonic()
s = socket.create_connection(("127.0.0.1", port))
data = b""
if tls_connect:
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (tls_connect.encode(), tls_connect.encode()))
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    data = b""
    start = time.monotonic()
closed = False
try:
    if drip > 0:
        for b in request:
            s.sendall(bytes([b]))
            time.sleep(drip)
            if time.monotonic() - start > limit:
                break
    elif request:
        s.sendall(request)
except (BrokenPipeError, ConnectionResetError):
    pass  # the proxy answered and closed: read what it said
while not closed and time.monotonic() - start < limit:
    s.settimeout(max(0.05, limit - (time.monotonic() - start)))
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        break
    except ConnectionResetError:
        closed = True
        break
    if not chunk:
        closed = True
        break
    data += chunk
print(json.dumps({"text": data.decode("utf-8", "replace"), "closed": closed, "seconds": round(time.monotonic() - start, 3)}))
