#!/usr/bin/env python3
"""A minimal WebSocket client through an HTTP proxy, for the end-to-end tests.

usage: client.py PROXY_PORT ws://host:port/path|wss://host:port/path MESSAGE [CA_FILE]
Prints the 101 status line, then the echoed message; exits non-zero on any
protocol error. ws:// is sent in absolute form, wss:// through CONNECT.
"""
import base64, hashlib, os, socket, ssl, struct, sys
from urllib.parse import urlsplit


def read_until(sock, marker):
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("connection closed before %r" % marker)
        data += chunk
    head, _, rest = data.partition(marker)
    return head, rest


def recv_exact(sock, n, buffered):
    while len(buffered) < n:
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("connection closed mid-frame")
        buffered += chunk
    return buffered[:n], buffered[n:]


def frame(opcode, payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    length = len(payload)
    header = bytes([0x80 | opcode])
    if length < 126:
        header += bytes([0x80 | length])
    else:
        header += bytes([0x80 | 126]) + struct.pack("!H", length)
    return header + mask + masked


def read_frame(sock, buffered):
    head, buffered = recv_exact(sock, 2, buffered)
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if head[1] & 0x80:
        raise SystemExit("the server masked its frame")
    if length == 126:
        raw, buffered = recv_exact(sock, 2, buffered)
        length = struct.unpack("!H", raw)[0]
    payload, buffered = recv_exact(sock, length, buffered)
    return opcode, payload, buffered


def main():
    port, url, message = int(sys.argv[1]), urlsplit(sys.argv[2]), sys.argv[3]
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    authority = "%s:%d" % (url.hostname, url.port)
    if url.scheme == "wss":
        sock.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode())
        head, _ = read_until(sock, b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n")[0]:
            raise SystemExit("CONNECT refused: %r" % head)
        context = ssl.create_default_context(cafile=sys.argv[4])
        sock = context.wrap_socket(sock, server_hostname=url.hostname)
        target = url.path
    else:
        target = "http://%s%s" % (authority, url.path)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (target, authority, key)).encode())
    head, buffered = read_until(sock, b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    print(lines[0])
    headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    expected = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != expected:
        raise SystemExit("bad Sec-WebSocket-Accept: %r" % headers)
    sock.sendall(frame(0x1, message.encode()))
    opcode, payload, buffered = read_frame(sock, buffered)
    if opcode != 0x1:
        raise SystemExit("expected a text frame, got opcode %d" % opcode)
    print(payload.decode())
    sock.sendall(frame(0x8, struct.pack("!H", 1000)))
    opcode, _, _ = read_frame(sock, buffered)
    if opcode != 0x8:
        raise SystemExit("expected a close frame, got opcode %d" % opcode)
    sock.close()


main()
