#!/usr/bin/env python3
"""Clients that half-close, for the half-close tests. Each prints one JSON
object with what it got.

usage:
  halfclose.py plain PROXY_PORT URL
      An absolute-form GET, then shutdown(SHUT_WR) at once; reads the reply to EOF.
  halfclose.py pipelined PROXY_PORT URL1 URL2
      Two absolute-form GETs in one write, then shutdown(SHUT_WR) at once;
      reads both replies to EOF.
  halfclose.py mitm PROXY_PORT HOST:PORT PATH CA_FILE
      CONNECT, TLS trusting CA_FILE, a GET for PATH, then TLS close_notify and
      shutdown(SHUT_WR); reads the decrypted reply to the server's EOF.
  halfclose.py passthrough-client PROXY_PORT
      Starts a raw TCP origin that reads to EOF and only then answers with
      how many bytes it got; CONNECTs to it, sends 100000 bytes, shuts its
      write side, and reads the answer.
  halfclose.py passthrough-server PROXY_PORT
      Starts a raw TCP origin that greets, shuts its write side and then
      reads to EOF; the client reads the greeting to EOF, then sends bytes
      and shuts its own side. Reports what the origin received.
"""
import json, socket, ssl, sys, threading

TIMEOUT = 10


def read_to_eof(s):
    data = b""
    s.settimeout(TIMEOUT)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data, "eof"
            data += chunk
    except socket.timeout:
        return data, "timeout"
    except ConnectionResetError:
        return data, "reset"


def connect_through(proxy_port, authority):
    s = socket.create_connection(("127.0.0.1", proxy_port))
    s.settimeout(TIMEOUT)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()))
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = s.recv(1)
        if not chunk:
            raise SystemExit(json.dumps({"error": "the proxy closed during CONNECT", "reply": reply.decode("latin-1")}))
        reply += chunk
    if not reply.startswith(b"HTTP/1.1 200"):
        raise SystemExit(json.dumps({"error": "CONNECT refused", "reply": reply.decode("latin-1")}))
    return s


def raw_origin(handler):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    result = {}

    def serve():
        conn, _ = server.accept()
        conn.settimeout(TIMEOUT)
        try:
            handler(conn, result)
        except OSError as e:
            result["origin_error"] = repr(e)
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], thread, result


def pipelined(proxy_port, first, second):
    s = socket.create_connection(("127.0.0.1", proxy_port))
    requests = b"".join(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.encode(), url.split("/")[2].encode()) for url in (first, second))
    s.sendall(requests)
    s.shutdown(socket.SHUT_WR)
    data, end = read_to_eof(s)
    s.close()
    return {"reply": data.decode("latin-1"), "end": end}


def plain(proxy_port, url):
    s = socket.create_connection(("127.0.0.1", proxy_port))
    host = url.split("/")[2]
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.encode(), host.encode()))
    s.shutdown(socket.SHUT_WR)
    data, end = read_to_eof(s)
    return {"reply": data.decode("utf-8", "replace"), "end": end}


def mitm(proxy_port, authority, path, cafile):
    s = connect_through(proxy_port, authority)
    context = ssl.create_default_context(cafile=cafile)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=authority.rsplit(":", 1)[0])

    def pump_out():
        pending = outgoing.read()
        if pending:
            s.sendall(pending)

    def pump_in():
        chunk = s.recv(65536)
        if chunk:
            incoming.write(chunk)
        else:
            incoming.write_eof()
        return bool(chunk)

    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            pump_out()
            if not pump_in():
                return {"error": "EOF during the handshake"}
    pump_out()
    tls.write(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), authority.encode()))
    pump_out()
    # Our close_notify, then the TCP FIN: we will send nothing more.
    try:
        tls.unwrap()
    except ssl.SSLWantReadError:
        pass
    pump_out()
    s.shutdown(socket.SHUT_WR)
    data, end = b"", "?"
    try:
        while True:
            try:
                chunk = tls.read(65536)
                if not chunk:
                    # An empty read is the peer's close_notify (an EOF without
                    # one raises SSLEOFError).
                    end = "close_notify"
                    break
                data += chunk
            except ssl.SSLWantReadError:
                pump_in()  # at the TCP EOF, the next read says whether close_notify came first
            except ssl.SSLZeroReturnError:
                end = "close_notify"
                break
            except ssl.SSLEOFError:
                end = "eof without close_notify"
                break
    except socket.timeout:
        end = "timeout"
    except (ConnectionResetError, ssl.SSLError) as e:
        end = "error: %r" % e
    return {"reply": data.decode("utf-8", "replace"), "end": end}


def passthrough_client(proxy_port):
    def handler(conn, result):
        data, end = read_to_eof(conn)
        result["origin_got"] = len(data)
        conn.sendall(b"got %d bytes" % len(data))
        conn.shutdown(socket.SHUT_WR)

    port, thread, result = raw_origin(handler)
    s = connect_through(proxy_port, "127.0.0.1:%d" % port)
    s.sendall(b"x" * 100000)
    s.shutdown(socket.SHUT_WR)
    data, end = read_to_eof(s)
    thread.join(TIMEOUT)
    return {"reply": data.decode("latin-1"), "end": end, **result}


def passthrough_server(proxy_port):
    def handler(conn, result):
        conn.sendall(b"hello")
        conn.shutdown(socket.SHUT_WR)
        data, end = read_to_eof(conn)
        result["origin_got"] = data.decode("latin-1")
        result["origin_end"] = end

    port, thread, result = raw_origin(handler)
    s = connect_through(proxy_port, "127.0.0.1:%d" % port)
    greeting, first_end = read_to_eof(s)
    try:
        s.sendall(b"world")
        s.shutdown(socket.SHUT_WR)
    except OSError as e:
        result["client_error"] = repr(e)
    rest, end = read_to_eof(s)
    thread.join(TIMEOUT)
    return {"greeting": greeting.decode("latin-1"), "greeting_end": first_end, "end": end, **result}


def main():
    mode = sys.argv[1]
    if mode == "plain":
        out = plain(int(sys.argv[2]), sys.argv[3])
    elif mode == "pipelined":
        out = pipelined(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif mode == "mitm":
        out = mitm(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif mode == "passthrough-client":
        out = passthrough_client(int(sys.argv[2]))
    elif mode == "passthrough-server":
        out = passthrough_server(int(sys.argv[2]))
    else:
        raise SystemExit("unknown mode %s" % mode)
    print(json.dumps(out))


main()
