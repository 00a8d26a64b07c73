#!/usr/bin/env python3
"""Sends raw request bytes inside an intercepted HTTPS tunnel, for tests of
what a proxy does with bytes curl would not send (non-ASCII targets).

usage: rawtls.py PROXY_PORT HOST:PORT CA_FILE @FILE [TIMEOUT]
Sends CONNECT HOST:PORT through the proxy on 127.0.0.1:PROXY_PORT, runs TLS
trusting CA_FILE, sends the bytes of FILE as they are, and prints one JSON
object: status (the response's status code, or null) and the response as text.
"""
import json, socket, ssl, sys

port, target, ca, source = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 5.0
with open(source[1:], "rb") as f:
    request = f.read()
s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
reply = b""
while b"\r\n\r\n" not in reply:
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
if not reply.startswith(b"HTTP/1.1 200"):
    print(json.dumps({"status": None, "text": reply.decode("utf-8", "replace")}))
    sys.exit(0)
context = ssl.create_default_context(cafile=ca)
tls = context.wrap_socket(s, server_hostname=target.rsplit(":", 1)[0])
tls.sendall(request)
data = b""
try:
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        data += chunk
except (socket.timeout, ssl.SSLError, ConnectionResetError):
    pass
status = None
if data.startswith(b"HTTP/"):
    try:
        status = int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        pass
print(json.dumps({"status": status, "text": data.decode("utf-8", "replace")}))
