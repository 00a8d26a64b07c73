#!/usr/bin/env python3
"""A client that asks for a large body and never reads it.

usage: stall.py PROXY_PORT URL SECONDS
Sends one GET through the proxy, then holds the connection without reading
for SECONDS. Prints "sent" once the request is out.
"""
import socket, sys, time

port, url, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
s = socket.socket()
# A small receive buffer: what the kernel takes in for us stays small too.
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % url).encode())
print("sent", flush=True)
time.sleep(seconds)
s.close()
