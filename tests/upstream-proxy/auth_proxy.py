#!/usr/bin/env python3
"""A minimal HTTP proxy that demands basic auth, for the chaining tests.

usage: auth_proxy.py USER PASSWORD LOG
Writes its port as LOG's first line, then a line per request it sees:
"<request line> auth=ok|refused". (A file, not stdout: a pipe's other end
would be inherited by every process the test starts after it.)
CONNECT opens a tunnel; absolute-form requests go to their origin in origin-form.
One request per connection is enough for the tests.
"""
import asyncio, base64, sys

USER, PASSWORD, LOG = sys.argv[1], sys.argv[2], sys.argv[3]


def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")
EXPECTED = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    request_line = lines[0]
    headers = [l for l in lines[1:] if l]
    auth = next((l.split(":", 1)[1].strip() for l in headers if l.lower().startswith("proxy-authorization:")), None)
    ok = auth == EXPECTED
    log(f"{request_line} auth={'ok' if ok else 'refused'}")
    if not ok:
        writer.write(b'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        await writer.drain()
        writer.close()
        return
    method, target, version = request_line.split(" ", 2)
    if method == "CONNECT":
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
    else:
        rest = target.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "80")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        kept = [l for l in headers if not l.lower().startswith("proxy-authorization:")]
        up_writer.write(f"{method} /{path} {version}\r\n".encode("latin-1") + "".join(f"{l}\r\n" for l in kept).encode("latin-1") + b"\r\n")
        await up_writer.drain()
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    log(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
