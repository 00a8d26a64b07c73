#!/usr/bin/env python3
"""A SOCKS5 client that misbehaves on purpose, for Tests/IntegrationTests/SOCKSTests.swift.

usage: probe.py PORT TIMEOUT CHUNK...   (each CHUNK is hex, sent in order, a short pause between)
Prints JSON: {"reply": hex of everything the proxy sent, "closed": the proxy closed, "timed_out": it did not}.
A CHUNK of "-" half-closes (shutdown SHUT_WR)."""
import json
import socket
import sys
import time

port, timeout, chunks = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
for chunk in chunks:
    try:
        if chunk == "-":
            s.shutdown(socket.SHUT_WR)
        else:
            s.sendall(bytes.fromhex(chunk))
    except OSError:
        break
    time.sleep(0.1)
got, closed, timed_out = b"", False, False
deadline = time.monotonic() + timeout
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        timed_out = True
        break
    s.settimeout(left)
    try:
        data = s.recv(4096)
    except socket.timeout:
        timed_out = True
        break
    except ConnectionResetError:
        closed = True
        break
    if not data:
        closed = True
        break
    got += data
print(json.dumps({"reply": got.hex(), "closed": closed, "timed_out": timed_out}))
