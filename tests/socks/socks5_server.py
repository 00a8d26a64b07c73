#!/usr/bin/env python3
"""A small SOCKS5 server (RFC 1928, RFC 1929 auth) for the upstream_proxy chaining tests.

usage: socks5_server.py LOG [USER PASSWORD]
Writes its port as LOG's first line, then a line per request it sees:
"CONNECT <host>:<port> <domain|ipv4|ipv6> auth=<none|ok|refused>". (A file, not stdout: a
pipe's other end would be inherited by every process the test starts after it.)
With USER and PASSWORD it demands username/password; without, it takes "no authentication".
"""
import asyncio
import ipaddress
import socket
import sys

LOG = sys.argv[1]
CREDENTIALS = (sys.argv[2].encode(), sys.argv[3].encode()) if len(sys.argv) > 3 else None


def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")


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
        ver, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        auth = "none"
        if CREDENTIALS:
            if 2 not in methods:
                writer.write(b"\x05\xff")
                log("greeting without username/password auth=refused")
                return
            writer.write(b"\x05\x02")
            _, ulen = await reader.readexactly(2)
            user = await reader.readexactly(ulen)
            (plen,) = await reader.readexactly(1)
            password = await reader.readexactly(plen)
            if (user, password) != CREDENTIALS:
                writer.write(b"\x01\x01")
                log("auth=refused")
                return
            writer.write(b"\x01\x00")
            auth = "ok"
        else:
            writer.write(b"\x05\x00")
        _, cmd, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host, kind = str(ipaddress.IPv4Address(await reader.readexactly(4))), "ipv4"
        elif atyp == 4:
            host, kind = str(ipaddress.IPv6Address(await reader.readexactly(16))), "ipv6"
        else:
            (n,) = await reader.readexactly(1)
            host, kind = (await reader.readexactly(n)).decode(), "domain"
        port = int.from_bytes(await reader.readexactly(2), "big")
        log(f"CONNECT {host}:{port} {kind} auth={auth}")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00")
            return
        bound = up_writer.get_extra_info("sockname")
        try:
            packed = socket.inet_aton(bound[0])
        except OSError:
            packed = bytes(4)
        writer.write(b"\x05\x00\x00\x01" + packed + bound[1].to_bytes(2, "big"))
        await writer.drain()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    log(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


asyncio.run(main())
