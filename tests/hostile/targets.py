#!/usr/bin/env python3
"""The request-target property test: sends many generated request targets
through the proxy, plain (absolute-form) and intercepted (CONNECT, then TLS
with the proxy's CA), to echo origins this script runs itself, which answer
with the request line they received. Each target must arrive unchanged,
percent-encoded where it had raw bytes outside ASCII (which HTTP does not
allow there), or be refused with a 4xx that says why; none may go unanswered.

usage: targets.py PROXY_PORT CA_FILE WORKDIR
Prints one JSON object with the counts and every failure.
"""
import json, os, socket, ssl, subprocess, sys, threading

proxy_port, ca_file, workdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
TIMEOUT = 5.0


def echo_origin(tls_context):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)

    def handle(conn):
        try:
            if tls_context:
                conn = tls_context.wrap_socket(conn, server_side=True)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            line = data.split(b"\r\n", 1)[0]
            target = line.split(b" ")[1] if line.count(b" ") >= 2 else b""
            body = b"target=" + target
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        except Exception:
            pass
        finally:
            conn.close()

    def serve():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def tls_server_context():
    key, cert = os.path.join(workdir, "origin.key"), os.path.join(workdir, "origin.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def read_response(sock):
    data = b""
    sock.settimeout(TIMEOUT)
    while True:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            return data, "timeout"
        except (ConnectionResetError, ssl.SSLError):
            return data, "reset"
        if not chunk:
            return data, "closed"
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if length and len(body) >= int(length[0].split(b":")[1]):
                return data, "complete"


def send_plain(method, target, origin_port):
    sock = socket.create_connection(("127.0.0.1", proxy_port))
    url = b"http://localhost:%d" % origin_port + (b"" if target == b"*" else target)
    sock.sendall(method + b" " + url + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    try:
        return read_response(sock)
    finally:
        sock.close()


def send_intercepted(method, target, origin_port, client_context):
    sock = socket.create_connection(("127.0.0.1", proxy_port))
    sock.settimeout(TIMEOUT)
    sock.sendall(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (origin_port, origin_port))
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(4096)
        if not chunk:
            return reply, "closed before CONNECT was answered"
        reply += chunk
    tls = client_context.wrap_socket(sock, server_hostname="localhost")
    tls.sendall(method + b" " + target + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    try:
        return read_response(tls)
    finally:
        tls.close()


def targets():
    out = []
    # Every printable ASCII byte, in the path and in the query.
    for b in range(0x21, 0x7F):
        c = bytes([b])
        out.append((b"GET", b"/p" + c + b"x"))
        out.append((b"GET", b"/q?x=a" + c + b"b"))
    # Percent escapes, valid or not.
    for e in [b"%20", b"%2F", b"%00", b"%25", b"%zz", b"%", b"%e2%82%ac", b"%C3%A9"]:
        out.append((b"GET", b"/e" + e + b"/x?y=" + e))
    # Raw UTF-8: forwarded with those bytes percent-encoded.
    out.append((b"GET", "/raw/café/日本?q=ü".encode()))
    # Long ones, an empty query, a root, OPTIONS *.
    out.append((b"GET", b"/" + b"a" * 8000))
    out.append((b"GET", b"/long?" + b"q=" + b"b" * 30000))
    out.append((b"GET", b"/empty?"))
    out.append((b"GET", b"/"))
    out.append((b"OPTIONS", b"*"))
    return out


def expected(target):
    # A fragment is not part of what goes on the wire (RFC 9110 §4.2.4).
    return target.split(b"#", 1)[0] if b"#" in target and target != b"*" else target


def percent_encoded(target):
    """The target with each byte outside ASCII as %XX, as the proxy forwards it."""
    return b"".join(b"%%%02X" % b if b >= 0x80 else bytes([b]) for b in target)


def main():
    plain_port = echo_origin(None)
    tls_port = echo_origin(tls_server_context())
    client_context = ssl.create_default_context(cafile=ca_file)
    results = {"sent": 0, "unchanged": 0, "encoded": 0, "refused": 0, "failures": []}
    for mode in ("plain", "intercepted"):
        for method, target in targets():
            results["sent"] += 1
            try:
                if mode == "plain":
                    data, how = send_plain(method, target, plain_port)
                else:
                    data, how = send_intercepted(method, target, tls_port, client_context)
            except Exception as error:
                data, how = b"", "error: %r" % error
            head, _, body = data.partition(b"\r\n\r\n")
            status = head.split(b" ", 2)[1] if head.startswith(b"HTTP/1.") else b""
            want = expected(target)
            if status == b"200" and body == b"target=" + want:
                results["unchanged"] += 1
            elif status == b"200" and want != percent_encoded(want) and body == b"target=" + percent_encoded(want):
                results["encoded"] += 1
            elif status[:1] == b"4" and b"Busymate: " in body and len(body) > 20:
                results["refused"] += 1
            else:
                results["failures"].append({"mode": mode, "target": target.decode("utf-8", "replace")[:80], "how": how,
                                            "status": status.decode(), "body": body.decode("utf-8", "replace")[:200]})
    print(json.dumps(results))


main()
