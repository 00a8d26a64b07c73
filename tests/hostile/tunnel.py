#!/usr/bin/env python3
"""A passed-through CONNECT tunnel that is busy, then idle, for the timeout tests.

usage: tunnel.py PORT HOST:PORT REQUESTS INTERVAL_SECONDS LIMIT_SECONDS
Opens CONNECT HOST:PORT through the proxy on 127.0.0.1:PORT, sends REQUESTS
plain HTTP/1.1 requests through it INTERVAL_SECONDS apart (each must be
answered), then sends nothing and waits for the proxy to close, at most
LIMIT_SECONDS. Prints one JSON object: how many were answered, whether the
proxy closed the idle tunnel, and how long after the last answer.
"""
import json, socket, sys, time

port, target = int(sys.argv[1]), sys.argv[2]
requests, interval, limit = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
data = b""
while b"\r\n\r\n" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
established = data.split(b"\r\n", 1)[0].decode("latin-1")
answered = 0
error = None
for i in range(requests):
    if i:
        time.sleep(interval)
    try:
        s.sendall(b"GET /tunnel-%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (i, target.encode()))
        reply = b""
        while b"origin GET /tunnel-%d" % i not in reply:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed while busy")
            reply += chunk
        answered += 1
    except (OSError, ConnectionError) as e:
        error = str(e)
        break
idle_from = time.monotonic()
closed = False
if error is None:
    s.settimeout(limit)
    try:
        closed = s.recv(65536) == b""
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        pass
print(json.dumps({"established": established, "answered": answered, "error": error, "closed": closed,
                  "idle_seconds": round(time.monotonic() - idle_from, 3)}))
