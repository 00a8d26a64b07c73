#!/usr/bin/env python3
"""WebSocket origins for the WebSocket suite, on 127.0.0.1 port 0: the
Python websockets library's server, plain and over TLS, with and without
permessage-deflate. Its ports go to --out as JSON once it listens.

Paths: /echo echoes each message; /close-server sends two messages, then
closes with 4001 "server done"; /flood?n=N&size=S sends N text messages of S
bytes as fast as the socket takes them, then closes 1000; /bomb sends one
compressed message that inflates to 80 MiB (deflate sockets); /sink reads
and drops; /fragments sends one text message in 3 fragments and one binary
message in 2, then echoes.
"""
import argparse, asyncio, json, ssl, sys, zlib
from urllib.parse import urlsplit, parse_qs

import websockets
from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response


def raw_frame(opcode, payload, rsv1=False):
    """A server's frame (unmasked), FIN set."""
    head = bytes([0x80 | (0x40 if rsv1 else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


async def handler(ws):
    url = urlsplit(ws.request.path)
    query = parse_qs(url.query)
    if url.path == "/close-server":
        await ws.send("first from the server")
        await ws.send(b"\x00\x01second, binary")
        await ws.close(4001, "server done")
        return
    if url.path == "/flood":
        n, size = int(query.get("n", ["1000"])[0]), int(query.get("size", ["1024"])[0])
        body = ("x" * size)
        for i in range(n):
            await ws.send("%08d" % i + body[8:])
        await ws.close(1000, "flood done")
        return
    if url.path == "/paced":
        # RATE messages a second for SECONDS, in steps of 10 ms, numbered; then a close.
        rate, seconds, size = int(query["rate"][0]), float(query["seconds"][0]), int(query.get("size", ["256"])[0])
        body = "y" * size
        loop = asyncio.get_running_loop()
        start, sent, total = loop.time(), 0, int(rate * seconds)
        while sent < total:
            due = min(total, int((loop.time() - start) * rate) + rate // 100)
            while sent < due:
                await ws.send("%09d" % sent + body[9:])
                sent += 1
            await asyncio.sleep(0.01)
        await ws.close(1000, "paced done")
        return
    if url.path == "/fragments":
        await ws.send(["one ", "two ", "three"])
        await ws.send([b"\x01\x02", b"\x03\x04"])
    if url.path == "/sink":
        async for _ in ws:
            pass
        return
    if url.path == "/bomb":
        # 80 MiB of zeros compressed by hand (about 80 KiB), in one frame written as is.
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        data = (compressor.compress(b"\x00" * (80 << 20)) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        ws.transport.write(raw_frame(0x2, data, rsv1=True))
        async for _ in ws:
            pass
        return
    async for message in ws:
        await ws.send(message)


PAGE = b"""<!doctype html><meta charset=utf-8><title>ws page</title><p id=state>connecting</p><p id=echoes>0</p>
<script>
const ws = new WebSocket("ws://" + location.host + "/echo?case=chromium");
let n = 0, echoes = 0;
ws.onopen = () => { document.getElementById("state").textContent = "open"; setInterval(() => ws.send(JSON.stringify({tick: ++n, from: "chromium"})), 400); };
ws.onmessage = () => { document.getElementById("echoes").textContent = String(++echoes); };
ws.onclose = e => { document.getElementById("state").textContent = "closed " + e.code; };
</script>
"""


def page(connection, request):
    """A plain GET of /page (no upgrade): the browser's page that opens the socket."""
    if request.path.startswith("/page"):
        headers = Headers([("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(PAGE))), ("Connection", "close")])
        return Response(200, "OK", headers, PAGE)
    return None


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    servers, ports = [], {}
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    for name, compression, tls in [("plain", "deflate", None), ("plain_raw", None, None), ("tls", "deflate", context), ("tls_raw", None, context)]:
        if tls is None and name.startswith("tls"):
            continue
        server = await serve(handler, "127.0.0.1", 0, compression=compression, ssl=tls, max_size=None, ping_interval=None,
                             process_request=page)
        servers.append(server)
        ports[name] = server.sockets[0].getsockname()[1]
    with open(args.out + ".tmp", "w") as f:
        json.dump(ports, f)
    import os
    os.rename(args.out + ".tmp", args.out)
    await asyncio.Future()


asyncio.run(main())
