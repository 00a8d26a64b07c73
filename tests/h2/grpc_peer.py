#!/usr/bin/env python3
"""gRPC peers of the HTTP/2 suite (grpcio, generic handlers: no generated
code). Messages are bytes: each one a protobuf message with field 1 a string,
so a schema-less decoder has something to show.

  grpc_peer.py serve --cert PEM --key KEY --out PORTS.json
      one server, TLS (a certificate for localhost) and plaintext, on
      127.0.0.1 port 0: /bm.Echo/Unary, /bm.Echo/ServerStream,
      /bm.Echo/ClientStream, /bm.Echo/Bidi (and the same methods under any
      other service name, so each case's rows have paths of their own).
  grpc_peer.py call --target localhost:PORT [--ca PEM] [--proxy http://127.0.0.1:P] --case NAME --service S
      one case as a client; prints one JSON line: what the client saw.
"""
import argparse, json, os, queue, sys, time
from concurrent import futures

sys.dont_write_bytecode = True


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def message(text):
    """A protobuf message: field 1 (length-delimited) = text."""
    data = text.encode() if isinstance(text, str) else text
    return b"\x0a" + varint(len(data)) + data if data else b""


def payload(msg):
    """The text of message() (field 1), or b"" for an empty message."""
    if not msg:
        return b""
    i, shift, length = 1, 0, 0
    while True:
        byte = msg[i]
        length |= (byte & 0x7F) << shift
        i += 1
        shift += 7
        if not byte & 0x80:
            break
    return msg[i:i + length]


# --- the server ---------------------------------------------------------------

def unary(request, context):
    text = payload(request)
    if text == b"":
        return b""  # an empty response (mitmproxy #5890)
    if text == b"notfound":
        # A trailers-only reply: one HEADERS frame with END_STREAM carrying grpc-status 5.
        context.abort(__import__("grpc").StatusCode.NOT_FOUND, "no such thing")
    if text.startswith(b"big:"):
        return message(b"x" * int(text[4:]))  # a response over 65 KB (mitmproxy #5428)
    return message(b"echo:" + text)


def server_stream(request, context):
    for i in range(int(payload(request) or b"5")):
        yield message("item %d" % i)


def client_stream(requests, context):
    items = [payload(r) for r in requests]
    return message("got %d: %s" % (len(items), b",".join(items).decode()))


def bidi(requests, context):
    for r in requests:
        yield message(b"pong:" + payload(r))


class Handler:
    """Any /SERVICE/METHOD, by the method's name."""

    def __init__(self):
        import grpc
        self.grpc = grpc

    def service(self, details):
        method = details.method.rsplit("/", 1)[-1]
        grpc = self.grpc
        return {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
            "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        }.get(method)


def serve(args):
    import grpc

    class Generic(grpc.GenericRpcHandler):
        def __init__(self):
            self.inner = Handler()

        def service(self, details):
            return self.inner.service(details)

    server = grpc.server(futures.ThreadPoolExecutor(16))
    server.add_generic_rpc_handlers((Generic(),))
    credentials = grpc.ssl_server_credentials([(open(args.key, "rb").read(), open(args.cert, "rb").read())])
    ports = {"tls": server.add_secure_port("127.0.0.1:0", credentials), "plain": server.add_insecure_port("127.0.0.1:0")}
    server.start()
    with open(args.out + ".tmp", "w") as f:
        json.dump(ports, f)
    os.rename(args.out + ".tmp", args.out)
    server.wait_for_termination()


# --- the client ---------------------------------------------------------------

def channel(args):
    import grpc
    options = [("grpc.enable_retries", 0)]
    if args.proxy:
        options.append(("grpc.http_proxy", args.proxy))
    if args.ca:
        credentials = grpc.ssl_channel_credentials(root_certificates=open(args.ca, "rb").read())
        return grpc.secure_channel(args.target, credentials, options)
    return grpc.insecure_channel(args.target, options)


def call(args):
    import grpc
    ch = channel(args)
    path = lambda m: "/%s/%s" % (args.service, m)
    ident = dict(request_serializer=None, response_deserializer=None)
    out = {"case": args.case}
    started = time.monotonic()
    try:
        if args.case == "unary":
            out["messages"] = [payload(ch.unary_unary(path("Unary"), **ident)(message("hello"), timeout=20)).decode()]
        elif args.case == "notfound":
            out["messages"] = [payload(ch.unary_unary(path("Unary"), **ident)(message("notfound"), timeout=20)).decode()]
        elif args.case == "empty":
            response = ch.unary_unary(path("Unary"), **ident)(b"", timeout=20)
            out["messages"], out["size"] = [payload(response).decode()], len(response)
        elif args.case == "big":
            response = ch.unary_unary(path("Unary"), **ident)(message("big:%d" % args.size), timeout=20)
            text = payload(response)
            out["size"], out["intact"] = len(text), text == b"x" * args.size
        elif args.case == "server_stream":
            out["messages"] = [payload(r).decode() for r in ch.unary_stream(path("ServerStream"), **ident)(message(str(args.count)), timeout=20)]
        elif args.case == "client_stream":
            requests = iter([message("m%d" % i) for i in range(args.count)])
            out["messages"] = [payload(ch.stream_unary(path("ClientStream"), **ident)(requests, timeout=20)).decode()]
        elif args.case == "bidi":
            out.update(ping_pong(ch, path("Bidi"), args.count))
        out["status"] = "OK"
    except grpc.RpcError as error:
        out["status"], out["details"] = str(error.code()), error.details()
    except Exception as error:  # e.g. the channel never became ready
        out["status"], out["details"] = type(error).__name__, str(error)
    out["seconds"] = time.monotonic() - started
    ch.close()
    print(json.dumps(out), flush=True)


def ping_pong(ch, method, count):
    """count round trips on one bidi call: each ping sent only after the last pong came."""
    outgoing = queue.Queue()

    def requests():
        while True:
            item = outgoing.get()
            if item is None:
                return
            yield item

    # The channel connects before the clock starts: the timing is round trips, not the dial.
    import grpc
    grpc.channel_ready_future(ch).result(timeout=20)
    responses = ch.stream_stream(method, request_serializer=None, response_deserializer=None)(requests(), timeout=60)
    wrong, done = 0, 0
    started = time.monotonic()
    try:
        for i in range(count):
            outgoing.put(message("p%d" % i))
            if payload(next(responses)) != b"pong:p%d" % i:
                wrong += 1
            done += 1
    finally:
        outgoing.put(None)
    elapsed = time.monotonic() - started
    for _ in responses:
        pass
    return {"round_trips": done, "wrong": wrong, "us_per_round_trip": elapsed / max(done, 1) * 1e6}


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--out", required=True)
    c = sub.add_parser("call")
    c.add_argument("--target", required=True)
    c.add_argument("--ca")
    c.add_argument("--proxy")
    c.add_argument("--case", required=True)
    c.add_argument("--service", default="bm.Echo")
    c.add_argument("--count", type=int, default=5)
    c.add_argument("--size", type=int, default=200000)
    args = parser.parse_args()
    serve(args) if args.command == "serve" else call(args)


if __name__ == "__main__":
    main()
