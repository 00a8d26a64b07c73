#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (the TLS hellos are captured
ones, kept as they are; see fuzz/README.md). Run from anywhere:
    python3 fuzz/make-seeds.py
Seeds are small, realistic inputs; libFuzzer grows from them."""
import json, os, struct

here = os.path.dirname(os.path.abspath(__file__))

def seeds(target, items):
    folder = os.path.join(here, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in items.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)

def crlf(text):
    return text.replace("\n", "\r\n").encode()

def read_tls(name):
    with open(os.path.join(here, "corpus", "tls-hello", name), "rb") as f:
        return f.read()

# --- http1: bytes a client sends to the proxy (or inside an intercepted tunnel)
hello = read_tls("client-hello-tls13-sni")
seeds("http1", {
    "get-absolute": crlf("GET http://example.com/index.html?q=1 HTTP/1.1\nHost: example.com\nUser-Agent: curl/7.88.1\nAccept: */*\nProxy-Connection: Keep-Alive\n\n"),
    "get-origin-form": crlf("GET /v1/users?page=2 HTTP/1.1\nHost: api.test\nAccept: application/json\nConnection: keep-alive\n\n"),
    "connect": crlf("CONNECT api.example.com:443 HTTP/1.1\nHost: api.example.com:443\nUser-Agent: curl/7.88.1\nProxy-Connection: Keep-Alive\n\n"),
    "connect-then-client-hello": crlf("CONNECT api.example.com:443 HTTP/1.1\nHost: api.example.com:443\n\n") + hello,
    "connect-ipv6": crlf("CONNECT [::1]:8443 HTTP/1.1\nHost: [::1]:8443\n\n"),
    "connect-no-port": crlf("CONNECT example.com HTTP/1.1\nHost: example.com\n\n"),
    "post-chunked": crlf("POST http://api.test/v1/upload HTTP/1.1\nHost: api.test\nTransfer-Encoding: chunked\nContent-Type: application/json\n\n")
        + b"5\r\n{\"a\":\r\n3\r\n1}\n\r\n0\r\nX-Trailer: t\r\n\r\n",
    "post-content-length": crlf("POST http://www.example.com/form HTTP/1.1\nHost: www.example.com\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 7\nCookie: a=b\n\n") + b"a=1&b=2",
    "pipelined": crlf("GET http://example.com/a HTTP/1.1\nHost: example.com\n\nGET http://example.com/b HTTP/1.1\nHost: example.com\nConnection: close\n\n"),
    "http10": crlf("GET http://example.com/ HTTP/1.0\nUser-Agent: Wget/1.21\n\n"),
    "websocket-upgrade": crlf("GET http://echo.example.com/ws HTTP/1.1\nHost: echo.example.com\nConnection: Upgrade\nUpgrade: websocket\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n\n"),
    "hop-by-hop": crlf("GET http://www.example.com/a HTTP/1.1\nHost: www.example.com\nConnection: close, X-Secret\nX-Secret: 1\nKeep-Alive: timeout=5\n"
                       "TE: trailers\nProxy-Authorization: Basic dTpw\nX-Drop: 1\n\n"),
    "map-remote": crlf("GET http://api.test/v1/users?id=1 HTTP/1.1\nHost: api.test\n\n"),
    "map-remote-v6": crlf("GET http://www.example.org/x/y HTTP/1.1\nHost: www.example.org\n\n"),
    "map-local": crlf("GET http://cdn.example.com/static/js/app.js HTTP/1.1\nHost: cdn.example.com\n\n"),
    "map-local-traversal": crlf("GET http://cdn.example.com/static/%2e%2e/out HTTP/1.1\nHost: cdn.example.com\n\n"
                                "GET http://cdn.example.com/static/../../secret HTTP/1.1\nHost: cdn.example.com\n\n"),
    "block-and-drop": crlf("GET http://ads.example.com/pixel.gif HTTP/1.1\nHost: ads.example.com\n\nGET http://drop.example.com/ HTTP/1.1\nHost: drop.example.com\n\n"),
    "options-star": crlf("OPTIONS * HTTP/1.1\nHost: example.com\n\n"),
    "expect-continue": crlf("PUT http://example.com/up HTTP/1.1\nHost: example.com\nContent-Length: 3\nExpect: 100-continue\n\n") + b"abc",
    "resent": crlf("DELETE http://api.test/v1/items/7 HTTP/1.1\nHost: api.test\nX-Busymate-Resent-From: 42\n\n"),
    "https-absolute": crlf("GET https://example.com/ HTTP/1.1\nHost: example.com\n\n"),
    "userinfo-port": crlf("GET http://user:pw@Host.Example:8080/x HTTP/1.1\nHost: Host.Example:8080\n\n"),
    "idn-host": crlf("GET http://bücher.example/ä?ö HTTP/1.1\nHost: bücher.example\n\n"),
    "no-host-header": crlf("HEAD http://[::1]:8080/health HTTP/1.1\nAccept: */*\n\n"),
    "malformed": crlf("THIS IS NOT HTTP\n\n"),
})

# --- tls-hello: the captured hellos, and a ClientHello split over two records
record = read_tls("client-hello-tls13-sni")
body = record[5:]
cut = 60
split = bytes([22, 3, 1]) + struct.pack(">H", cut) + body[:cut] + bytes([22, 3, 1]) + struct.pack(">H", len(body) - cut) + body[cut:]
seeds("tls-hello", {"client-hello-split-records": split, "not-tls": b"GET / HTTP/1.1\r\n\r\n"})

# --- settings: settings.json as people and the CLI write it
default = open(os.path.join(here, "..", "shared-group", "settings.json"), "rb").read()
full = {
    "mode": "proxy",
    "log_level": "debug",
    "proxy": {"listen": ["127.0.0.1:9090", "[::1]:9090", "0.0.0.0:8080"]},
    "ssl_proxying": {"include": ["*.example.com", "api.test", "[::1]"], "exclude": ["static.example.com"],
                     "insecure_upstream": ["*.internal"], "upstream_trust": "/etc/ssl/certs/ca-certificates.crt"},
    "tunnel": {"user": "busymate", "group": "busymate", "drain_seconds": 2.5},
    "capture": {"max_exchanges": 50000, "max_bytes": "2GiB", "body_max": "512KiB"},
    "rules": [
        {"name": "no ads", "match": "*.ads.example/*", "action": "block"},
        {"name": "legal", "match": "api.example.com/v2/*", "action": "block", "status": 451},
        {"name": "tracker", "match": "t.example.com/*", "action": "drop"},
        {"name": "mock", "match": "api.example.com/v1/config", "action": "map_local", "file": "/srv/mock/config.json"},
        {"name": "static", "match": "cdn.test/static/*", "action": "map_local", "directory": "/srv/www"},
        {"name": "staging", "match": "api.test/v1/*", "action": "map_remote", "to": "http://127.0.0.1:3000/api/"},
        {"name": "dns", "match": "*.test/*", "action": "host_override", "address": "::1", "enabled": False},
        {"name": "hdrs", "match": "https://*.example.com/*", "action": "headers",
         "request": {"remove": ["Cookie"], "set": {"X-Debug": "1"}, "add": {"X-Via": "busymate"}},
         "response": {"set": {"Cache-Control": "no-store"}}},
    ],
    "breakpoints": {"request": ["api.example.com/v1/orders*"], "response": ["*/graphql"], "timeout_seconds": 60},
    "upstream_proxy": {"host": "proxy.corp.example", "port": 3128, "username": "me", "password": "secret", "bypass": ["localhost", "*.internal"]},
    "future_key": {"kept": [1, 2.5e3, -0, True, None, "é\u2028\"\\"]},
}
seeds("settings", {
    "default": default,
    "full": json.dumps(full, indent=2, ensure_ascii=False) + "\n",
    "bom-and-crlf": b"\xef\xbb\xbf" + json.dumps({"log_level": "warning", "proxy": {"listen": ["127.0.0.1:0"]}}, indent=2).replace("\n", "\r\n").encode(),
    "invalid-trailing-comma": '{\n  "mode": "proxy",\n  "log_level": "info",\n}\n',
    "invalid-listen": '{"proxy": {"listen": ["nine"]}}',
    "invalid-duplicate-key": '{"mode": "proxy", "mode": "transparent"}',
    "invalid-rule": '{"rules": [{"name": "x", "match": "a b", "action": "map_remote", "to": "ftp://x"}]}',
    "escapes": '{"tunnel": {"user": "busy\\u006date"}, "x": "\\ud83d\\ude00\\n"}',
    "network": json.dumps({"mode": "transparent", "transparent": {"port": 9180, "ports": [80, 443], "interfaces": ["eth1"]},
                           "dns": {"port": 9153, "servers": ["10.0.0.53", "fd00::53"]}, "onboarding": {"listen": "192.168.1.20:9092"},
                           "devices": {"port_pool": "9100-9199", "idle_seconds": 90, "list": [{"name": "phone", "port": 9100}, {"name": "vm", "address": "10.0.0.5"}]},
                           "access": {"allow": ["192.168.1.0/24"], "grants": [{"address": "10.0.0.7", "until": "2030-01-01T00:00:00Z"}]}}, indent=2) + "\n",
})

# --- url-pattern: "pattern\nURL"
seeds("url-pattern", {
    "path-glob": "api.example.com/v1/*\nhttps://api.example.com/v1/users?page=2",
    "subdomains": "*.example.com\nhttps://www.example.com/",
    "ipv6-port": "https://[::1]:8443/x\nhttps://[::1]:8443/x?y=1",
    "port": "example.com:8080/*\nhttp://example.com:8080/a",
    "everything": "*\nhttp://h/",
    "case-and-fragment": "cdn.test/static/*\nHTTP://CDN.TEST/static/js/a.js#top",
    "unicode": "bücher.example/*\nhttps://BÜCHER.example/ä",
    "closed-trailing-slash": "api.test/v1/config\nhttps://api.test/v1/config/",
    "question-mark": "api?.test\napi1.test",
    "bad-port": "example.com:0/*\nhttp://example.com:0/",
})

# --- raw-http: messages as a person saves them at a breakpoint
seeds("raw-http", {
    "request-absolute": crlf("POST http://api.test/v1/orders HTTP/1.1\nHost: api.test\nContent-Type: application/json\nContent-Length: 11\n\n") + b'{"id": 42}\n',
    "request-origin-lf": b"GET /v1/users?page=2 HTTP/1.1\nHost: api.example.com\nAccept: */*\n\n",
    "response-200": crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nTransfer-Encoding: chunked\n\n") + b"hello\n",
    "response-204": crlf("HTTP/1.1 204 No Content\nContent-Length: 10\n\n"),
    "response-custom-reason": crlf("HTTP/1.0 418 I'm a teapot\nX-Edited: yes\n\n"),
    "folded": crlf("GET /a HTTP/1.1\nX-A: 1\n  folded\n\n"),
    "no-blank-line": b"HTTP/1.1 500 Oops\nRetry-After: 5",
})

# --- notification: datagrams on notify/*.sock
seeds("notification", {
    "settings": "busymate/1 settingsDidChange app-123",
    "paused": "busymate/1 breakpointPaused tunnel-77 42",
    "traffic": "busymate/1 newTrafficCaptured tunnel-77",
    "payload-spaces": "busymate/1 tunnelStateChanged app-1 ready to serve",
    "unknown-name": "busymate/1 devicePresenceChanged tunnel-8 phone",
    "unicode-payload": "busymate/1 breakpointContinue cli-9 résumé ✓",
})

# --- control-message: frames on control.sock (4-byte big-endian length, JSON)
def frame(obj):
    payload = json.dumps(obj, indent=2, sort_keys=True).encode()
    return struct.pack(">I", len(payload)) + payload
report = {
    "group": "/var/lib/busymate/group", "mode": "proxy",
    "supervisor": {"running": True, "pid": 812, "uptime_seconds": 3600.5, "settings_sha256": "ab" * 32},
    "tunnel": {"pid": 813, "uid": 998, "state": "ready", "privileges": "dropped to busymate:busymate", "settings_sha256": "ab" * 32,
               "settings_error": None, "started_at": "2025-01-02T03:04:05Z", "restarts": 0, "crash_loop": False, "last_exit": None,
               "next_restart_in_seconds": None, "adopted": False, "interception": "CA loaded", "last_error": None},
    "listeners": [{"address": "127.0.0.1:9090", "bound": "127.0.0.1:9090", "error": None}],
    "ca": {"present": True, "trusted": False, "error": None, "subject": "CN=Busymate CA", "fingerprint_sha256": "cd" * 32, "not_after": "2035-01-01T00:00:00Z"},
    "settings": {"path": "/var/lib/busymate/group/settings.json", "valid": True, "error": None, "unknown_keys": []},
    "counters": {"connections_total": 10, "connections_active": 1, "requests_total": 25, "bytes_from_clients": 1000, "bytes_to_clients": 50000,
                 "requests_per_second": 0.5, "breakpoints_held": 0},
}
tunnel_status = {"pid": 813, "uid": 998, "gid": 998, "privileges": "dropped to busymate:busymate", "state": "ready", "mode": "proxy",
                 "started_at": "2025-01-02T03:04:05Z", "updated_at": "2025-01-02T03:05:05Z", "settings_sha256": "ab" * 32, "settings_error": None,
                 "listeners": report["listeners"], "counters": report["counters"], "supervisor_attached": True}
seeds("control-message", {
    "status": frame({"kind": "status"}),
    "hello": frame({"kind": "hello", "pid": 813, "listeners": ["proxy 127.0.0.1:9090"]}),
    "state-then-pong": frame({"kind": "state", "pid": 813, "state": "draining"}) + frame({"kind": "pong", "seq": 7}),
    "serve": frame({"kind": "serve"}),
    "reply-with-report": frame({"kind": "reply", "ok": True, "report": report}),
    "reply-refused": frame({"kind": "reply", "ok": False, "message": "permission denied: uid 1000 is neither root nor in group busymate"}),
    "status-json": frame(tunnel_status),
    "truncated": struct.pack(">I", 100) + b'{"kind": "st',
})

# --- dictionaries (fuzz/dict/<target>.dict): tokens libFuzzer splices in.
# Written as latin-1 so that "\xc3\xa4" stands for those two bytes.
def dictionary(target, tokens):
    os.makedirs(os.path.join(here, "dict"), exist_ok=True)
    with open(os.path.join(here, "dict", target + ".dict"), "w") as f:
        f.write("# libFuzzer dictionary for fuzz-%s (written by fuzz/make-seeds.py)\n" % target)
        for token in tokens:
            data = token.encode("latin-1")
            f.write('"%s"\n' % "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02x" % c for c in data))

dictionary("http1", [
    "GET ", "POST ", "PUT ", "HEAD ", "OPTIONS ", "CONNECT ", "DELETE ", "PATCH ", "TRACE ",
    " HTTP/1.1\r\n", " HTTP/1.0\r\n", "\r\n", "\r\n\r\n", ": ", "http://", "HTTP://", "https://", "ws://",
    "Host: ", "Connection: ", "close", "keep-alive", "Upgrade", "Upgrade: websocket\r\n", "Proxy-Connection: ", "Keep-Alive: ",
    "TE: trailers\r\n", "Trailer: ", "Transfer-Encoding: chunked\r\n", "Content-Length: ", "Expect: 100-continue\r\n",
    "Proxy-Authorization: Basic dTpw\r\n", "X-Busymate-Resent-From: 1\r\n", "Cookie: ", "X-Drop: ", "X-Set: ",
    "0\r\n\r\n", "example.com", "www.example.com", "ads.example.com", "drop.example.com", "static.example.com",
    "cdn.example.com/static/", "cdn.example.com/one.json", "api.test", "api.test/v1/", "www.example.org", "secure.example.com",
    "x.internal", "localhost", "[::1]", "[fe80::1%25eth0]", ":443", ":80", ":8080", ":65535", ":0", "@", "user:pw@", "%2e%2e/", "../", "/./",
    "?", "#", "*", "\x16\x03\x01", "\xc3\xa4", "\xcc\x81", "\xef\xbf\xbd",
])
dictionary("tls-hello", [
    "\x16\x03\x01", "\x16\x03\x03", "\x01\x00", "\x02\x00", "\x00\x00", "\x00\x2b", "\x03\x04", "\x03\x03", "\x13\x01", "\xc0\x2f", "\x00\x10",
    "\x00\x0a", "\x00\x0d", "\x00\x33", "api.example.com", "\x00\x00\x00\x00",
])
dictionary("settings", [
    '"mode"', '"proxy"', '"log_level"', '"trace"', '"listen"', '"127.0.0.1:9090"', '"[::1]:0"', '"ssl_proxying"', '"include"', '"exclude"',
    '"insecure_upstream"', '"upstream_trust"', '"tunnel"', '"user"', '"group"', '"drain_seconds"', '"capture"', '"max_exchanges"',
    '"max_bytes"', '"body_max"', '"64MiB"', '"rules"', '"name"', '"match"', '"action"', '"enabled"', '"block"', '"drop"',
    '"map_local"', '"map_remote"', '"host_override"', '"headers"', '"status"', '"file"', '"directory"', '"to"', '"address"',
    '"request"', '"response"', '"remove"', '"set"', '"add"', '"breakpoints"', '"timeout_seconds"', '"upstream_proxy"',
    '"host"', '"port"', '"username"', '"password"', '"bypass"', "true", "false", "null", "1e3", "-0", "\\u0000", "\\ud83d\\ude00",
    "{", "}", "[", "]", ":", ",", "\xef\xbb\xbf", "\r\n", '"*.example.com"', '"http://127.0.0.1:3000/"', '"/srv/www"',
])
# --- dns: queries a transparent client sends, answers a server returns
def dns_name(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
def dns_query(ident, name, qtype, flags=0x0100):
    return struct.pack(">HHHHHH", ident, flags, 1, 0, 0, 0) + dns_name(name) + struct.pack(">HH", qtype, 1)
def dns_answer(query, rdatas, flags=0x8180):
    head = query[:2] + struct.pack(">HHHHH", flags, 1, len(rdatas), 0, 0)
    body = query[12:]
    for qtype, rdata in rdatas:
        body += b"\xc0\x0c" + struct.pack(">HHIH", qtype, 1, 300, len(rdata)) + rdata
    return head + body
q_a = dns_query(0x1234, "origin.test", 1)
q_aaaa = dns_query(0x4321, "origin.test", 28)
seeds("dns", {
    "query-a": q_a,
    "query-aaaa": q_aaaa,
    "answer-a": dns_answer(q_a, [(1, bytes([10, 77, 2, 2]))]),
    "answer-aaaa": dns_answer(q_aaaa, [(28, bytes.fromhex("fd770002000000000000000000000002"))]),
    "answer-cname-a": dns_answer(q_a, [(5, b"\x03www\xc0\x0c"), (1, bytes([192, 0, 2, 1]))]),
    "nxdomain": dns_answer(dns_query(7, "nothere.test", 1), [], flags=0x8183),
    "pointer-loop": struct.pack(">HHHHHH", 9, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + struct.pack(">HH", 1, 1),
})

dictionary("url-pattern", [
    "://", "http://", "https://", "ws://", "*", "*.", "?", "#", "/", ":", "[", "]", "[::1]", ":443", ":80", ":08080", "example.com",
    "\n", ".", "\xc3\x84", "\xcc\x81", "%2F",
])
dictionary("raw-http", [
    "GET ", "POST ", " HTTP/1.1", " HTTP/1.0", "HTTP/1.1 ", " 200 OK", " 204", " 304", " 101", "\r\n", "\n", "\r\n\r\n", ": ",
    "Content-Length: ", "Transfer-Encoding: chunked", "content-length", "Host: ", "http://", "/", "*", "\t", "\r", "\x7f",
])
dictionary("notification", [
    "busymate/1 ", "settingsDidChange", "newTrafficCaptured", "tunnelStateChanged", "breakpointPaused", "breakpointContinue",
    "caDidChange", " ", "\n", "tunnel-1", "app-2", "\xc3\xa9", "\xe2\x9c\x93",
])
dictionary("dns", [
    "\xc0\x0c", "\x00\x01\x00\x01", "\x00\x1c\x00\x01", "\x00\x05", "\x81\x80", "\x01\x00", "\x07example\x03com\x00", "\x00\x00\x01\x2c",
])
dictionary("control-message", [
    '"kind"', '"status"', '"tunnelStart"', '"tunnelStop"', '"tunnelRestart"', '"hello"', '"state"', '"pong"', '"listeners"',
    '"ping"', '"serve"', '"reply"', '"pid"', '"seq"', '"ok"', '"message"', '"report"', '"ready"', '"draining"',
    '"started_at"', '"2025-01-02T03:04:05Z"', '"counters"', '"connections_total"', "\x00\x00\x00", "\x00\x10\x00\x00",
    "\x00\x10\x00\x01", "true", "null", "{", "}", "[", "]",
])

# --- filter: what `busymate list`, the page and its live socket take
seeds("filter", {
    "domain": "~d example\\.com",
    "and-or-not": "~d api & !(~c 2xx | ~e) ~m post",
    "body-regex": "~bs '\"name\": *\"[a-z]+\"'",
    "since": "~since 10m & ~until 2026-11-23T10:00:00Z",
    "status-range": "~c 500-599 | ~c 4xx",
    "tls-device": "~tls mitm ~device phone ~dns",
    "headers": "~hq \"^user-agent: curl\" | ~hs set-cookie",
    "nested": "((~u a | (~u b & !~u c)) ~t json)",
    "bare-words": "users \"q=a b\" café",
    # Clauses the in-memory matcher must agree with SQL on, over FilterStore's rows.
    "no-response-error": "~q | ~e & !~s",
    "websocket": "~websocket | ~c 101 & !~websocket",
    "tcp-http-dns": "~tcp | ~dns & ~c 0-3 | !~http",
    "marks": "~marked | ~marker ^:star: | ~comment ticket",
    "replay-rule": "~replay & ~rule . | !~rule mock",
    "gzip-body": "~bs gzip-word | ~bq haystack | ~b Zürich",
    "body-file": "~bs haystack-word | ~bq in-the-file",
    "header-space": "~h \" application\" | ~hq \"x-quote: say\"",
    "escaped-header": "~hq '\\\\ back' | ~hq 'a\\tb'",
    "content-type": "~t ^$ | ~ts html | ~tq form | ~a",
    "src-dst-device": "~src ::1 | ~dst :443$ | ~device laptop",
    "tls-modes": "~tls none | ~tls passthrough & !~tcp",
    "url-decoded": "~u é | ~u %zz | ~u /A$ | ~d ^intranet",
    "millisecond": "~since 0.0005s | ~until 2027-01-15T08:00:00.000Z",
    "replays-udp": "~replays | ~udp | ~all & !~all",
    "status-edges": "~c 0 | ~c 999 | ~c 100-199",
    "proto-grpc": "~proto h2 & ~grpc | ~proto H1 & !~grpc | !~proto h1 & !~proto h2",
})
dictionary("filter", [
    "~all", "~d ", "~u ", "~m ", "~c ", "~h ", "~hq ", "~hs ", "~b ", "~bq ", "~bs ", "~t ", "~tq ", "~ts ", "~e", "~q", "~src ",
    "~dst ", "~websocket", "~marked", "~marker ", "~comment ", "~replay", "~replayq", "~replays", "~s", "~a", "~http", "~tcp",
    "~udp", "~tls ", "mitm", "passthrough", "none", "~rule ", "~device ", "~dns", "~since ", "~until ", " & ", " | ", "!", "(", ")",
    "\"", "'", "\\", "4xx", "500-599", "101", "30s", "10m", "0.0005s", "2027-01-15T08:00:00Z", "2027-01-15", "^", "$", ".*",
    ": ", " ", "%", "%C3%A9", "\xc3\xa9", "\xc3\xbc", "gzip", "deflate", "websocket", "CONNECT", "DNS", "json", "[::1]",
    "~proto ", "h1", "h2", "~grpc", "application/grpc", "HTTP/2.0",
])

# --- socks5: a client's bytes to the explicit proxy's port (first byte 0x05),
# or (any other first byte: bit 0 credentials, the rest the target) an
# upstream SOCKS5 proxy's answers to Busymate's client.
def socks_name(name, port):
    return bytes([5, 1, 0, 3, len(name)]) + name + struct.pack(">H", port)
seeds("socks5", {
    "connect-ipv4": bytes([5, 1, 0, 5, 1, 0, 1, 93, 184, 216, 34, 0, 80]),
    "connect-name": bytes([5, 1, 0]) + socks_name(b"example.com", 443),
    "connect-name-then-hello": bytes([5, 2, 0, 2]) + socks_name(b"API.Example.com", 443) + hello[:64],
    "connect-ipv6": bytes([5, 1, 0, 5, 1, 0, 4]) + bytes(15) + bytes([1]) + struct.pack(">H", 8443),
    "connect-mapped": bytes([5, 1, 0, 5, 1, 0, 4]) + bytes(10) + bytes([255, 255, 127, 0, 0, 1]) + struct.pack(">H", 22),
    "connect-then-http": bytes([5, 1, 0]) + socks_name(b"example.com", 80) + crlf("GET / HTTP/1.1\nHost: example.com\n\n"),
    "auth-only": bytes([5, 1, 2]),
    "no-methods": bytes([5, 0]),
    "bind": bytes([5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80]),
    "udp-associate": bytes([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]),
    "bad-atyp": bytes([5, 1, 0, 5, 1, 0, 9, 1, 2]),
    "empty-name": bytes([5, 1, 0, 5, 1, 0, 3, 0, 0, 80]),
    "port-zero": bytes([5, 1, 0]) + socks_name(b"example.com", 0),
    "url-in-name": bytes([5, 1, 0]) + socks_name(b"a.test/@b", 443),
    "socks4": bytes([4, 1, 0, 80, 127, 0, 0, 1, 0]),
    "short-request": bytes([5, 1, 0, 5, 1]),
    "upstream-open": bytes([0x00, 5, 0, 5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90]) + b"HTTP/1.1 200 OK\r\n",
    "upstream-open-v6": bytes([0x04, 5, 0, 5, 0, 0, 4]) + bytes(16) + bytes([0, 80]),
    "upstream-open-name": bytes([0x02, 5, 0, 5, 0, 0, 3, 9]) + b"localhost" + bytes([0, 80]),
    "upstream-auth": bytes([0x01, 5, 2, 1, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]),
    "upstream-auth-refused": bytes([0x03, 5, 2, 1, 1]),
    "upstream-wants-auth": bytes([0x00, 5, 2]),
    "upstream-no-method": bytes([0x01, 5, 0xff]),
    "upstream-refused": bytes([0x06, 5, 0, 5, 5, 0, 1, 0, 0, 0, 0, 0, 0]),
    "upstream-bad-atyp": bytes([0x00, 5, 0, 5, 0, 0, 7]),
    "upstream-socks4": bytes([0x00, 0, 90, 0, 0, 0, 0, 0, 0]),
})
dictionary("socks5", [
    "\x05\x01\x00", "\x05\x02\x00\x02", "\x05\x01\x00\x01", "\x05\x01\x00\x03", "\x05\x01\x00\x04", "\x05\x00",
    "\x05\xff", "\x01\x00", "\x00\x50", "\x01\xbb", "\x7f\x00\x00\x01", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff",
    "\x0bexample.com", "\x16\x03\x01", "GET / HTTP/1.1\r\n",
])

# --- grpc: a selector byte (grpc-encoding: none, gzip, deflate, identity, snappy), then a gRPC body
import gzip as _gzip, zlib as _zlib

def grpc_frame(message, compressed=False, declared=None):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(message) if declared is None else declared) + message

def gzipped(data):
    return _gzip.compress(data, mtime=0)

everything = bytes.fromhex(
    "089601" "120568656c6c6f" "1a06082a12026869" "2206038e029ea705" "28feffffffffffffffff01"
    "35d00f4940" "39ffffffffffffffff" "4203ff00ff" "4805" "5200")
nested = b"\x08\x01"
for _ in range(70):
    nested = b"\x0a" + bytes([len(nested)]) + nested if len(nested) < 128 else b"\x0a" + bytes([len(nested) & 0x7f | 0x80, len(nested) >> 7]) + nested
seeds("grpc", {
    "unary-plain": b"\x00" + grpc_frame(b"\x0a\x05world"),
    "every-wire-type": b"\x00" + grpc_frame(everything),
    "two-messages-gzip": b"\x01" + grpc_frame(gzipped(b"\x0a\x05hello\x10\x96\x01"), True) + grpc_frame(b"\x10\x96\x01"),
    "deflate": b"\x02" + grpc_frame(_zlib.compress(everything), True),
    "cut-short": b"\x00" + grpc_frame(b"\x0a\x05hello") + grpc_frame(b"\x0a\x03", declared=9),
    "group": b"\x00" + grpc_frame(b"\x0b\x08\x01\x0c"),
    "deep-nesting": b"\x00" + grpc_frame(nested),
    "empty-message": b"\x00" + grpc_frame(b""),
    "bad-flag": b"\x00" + b"\x07\x00\x00\x00\x01\x08",
    "web-trailers": b"\x03" + grpc_frame(b"\x08\x01") + b"\x80" + struct.pack(">I", 33) + b"grpc-status: 3\r\ngrpc-message: x\r\n",
    "snappy": b"\x04" + grpc_frame(b"\xff\x06\x00\x00sNaPpY", True),
    "path-and-status": b"\x00/helloworld.Greeter/SayHello%20%C3%A9",
})

# The descriptor-set half of fuzz-grpc: a selector byte with its high bit
# set (its low bits pick a message type), a 2-byte length, a
# FileDescriptorSet (descriptor.proto, written here by hand as protoc -o
# writes it), then one message's bytes.
def pb_varint(n):
    out = b""
    while True:
        byte, n = n & 0x7f, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out

def pb_len(number, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload

def pb_int(number, value):
    return pb_varint(number << 3) + pb_varint(value)

def pb_field(name, number, type_, label=1, type_name=None, packed=None):
    # No type (None): a type name alone, resolved to a message or an enum.
    out = pb_len(1, name) + pb_int(3, number) + pb_int(4, label) + (pb_int(5, type_) if type_ is not None else b"")
    if type_name is not None:
        out += pb_len(6, type_name)
    if packed is not None:
        out += pb_len(8, pb_int(2, 1 if packed else 0))
    return pb_len(2, out)

def pb_method(name, input_, output):
    return pb_len(2, pb_len(1, name) + pb_len(2, input_) + pb_len(3, output))

entry = pb_len(1, "AttrsEntry") + pb_field("key", 1, 9) + pb_field("value", 2, 9) + pb_len(7, pb_int(7, 1))
echo_message = (pb_len(1, "Msg") + pb_field("text", 1, 9) + pb_field("n", 2, 5) + pb_field("inner", 3, 11, type_name=".echo.Msg")
                + pb_field("tags", 4, 5, label=3, packed=True) + pb_field("kind", 5, 14, type_name=".echo.Kind")
                + pb_field("attrs", 6, 11, label=3, type_name=".echo.Msg.AttrsEntry") + pb_field("blob", 7, 12)
                + pb_field("ratio", 8, 1) + pb_field("small", 9, 17) + pb_len(3, entry))
echo_enum = pb_len(1, "Kind") + pb_len(2, pb_len(1, "A") + pb_int(2, 0)) + pb_len(2, pb_len(1, "B") + pb_int(2, 1))
echo_file = (pb_len(1, "echo.proto") + pb_len(2, "echo") + pb_len(4, echo_message) + pb_len(5, echo_enum)
             + pb_len(6, pb_len(1, "Echo") + pb_method("Say", ".echo.Msg", ".echo.Msg")))
echo_set = pb_len(1, echo_file)
# Type names relative to their scope (protoc writes full ones; others may not), and a message that holds itself.
relative_file = (pb_len(1, "rel.proto") + pb_len(2, "a.b") + pb_len(4, pb_len(1, "Outer") + pb_field("inner", 1, None, type_name="Inner")
                 + pb_field("self", 2, 11, type_name="Outer") + pb_field("color", 3, None, type_name="Color")
                 + pb_len(3, pb_len(1, "Inner") + pb_field("x", 1, 18, label=3))
                 + pb_len(4, pb_len(1, "Color") + pb_len(2, pb_len(1, "RED") + pb_int(2, 1)))))
relative_set = pb_len(1, relative_file)
echo_payload = (pb_len(1, "hello") + pb_int(2, 150) + pb_len(3, pb_len(1, "inner")) + pb_len(4, pb_varint(1) + pb_varint(300))
                + pb_int(5, 1) + pb_len(6, pb_len(1, "k") + pb_len(2, "v")) + pb_len(7, b"\x00\xff") + b"\x41" + b"\x00" * 8
                + b"\x4d\x01\x00\x00\x00" + pb_int(99, 7))

def schema_seed(selector, descriptor_set, payload):
    return bytes([0x80 | selector]) + struct.pack(">H", len(descriptor_set)) + descriptor_set + payload

seeds("grpc", {
    "schema-echo": schema_seed(0, echo_set, echo_payload),
    "schema-echo-map-entry": schema_seed(0, echo_set, pb_len(1, "k") + pb_len(2, "v")),
    "schema-echo-wrong-wire-types": schema_seed(1, echo_set, pb_int(1, 5) + pb_len(2, "x") + pb_len(3, b"\xff\xff")),
    "schema-relative-names": schema_seed(0, relative_set, pb_len(1, pb_int(1, 3) + pb_int(1, 4)) + pb_len(2, pb_len(2, b"")) + pb_int(3, 1)),
    "schema-two-files": schema_seed(2, echo_set + relative_set, echo_payload),
    "schema-not-a-set": schema_seed(0, pb_int(2, 1), b""),
    "schema-cut-short": schema_seed(0, echo_set[:40], echo_payload),
})

dictionary("grpc", [
    "\x00\x00\x00\x00", "\x01\x00\x00\x00", "\x80\x00\x00\x00", "\x08", "\x0a", "\x0d", "\x09", "\x0b", "\x0c", "\x12", "\x1a",
    "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\x1f\x8b\x08\x00", "grpc-status: ", "grpc-message: ", "%C3%A9",
    # descriptor.proto's tags: a file's name, package, message_type, enum_type, service; a field's number, label, type, type_name, options
    "\x22", "\x2a", "\x32", "\x18", "\x20", "\x28", "\x30", "\x3a", "\x42", "\x10\x01", ".echo.Msg", ".google.protobuf.Any",
])

# --- http2: what an h2c client sends to the explicit proxy after the
# connection preface (the harness sends the preface itself): frames made by
# python's h2 (a real client's), and by hand where h2 will not (CONTINUATION,
# floods, resets).
import h2.config, h2.connection, h2.settings, hpack
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

def h2_client():
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    return conn

def h2_bytes(conn):
    data = conn.data_to_send()
    return data[len(H2_PREFACE):] if data.startswith(H2_PREFACE) else data

def h2_request(path, method="GET", authority="example.com", extra=()):
    return [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)] + list(extra)

def h2_session(build):
    conn = h2_client()
    out = h2_bytes(conn)
    build(conn)
    return out + h2_bytes(conn)

def h2_post(conn):
    conn.send_headers(1, h2_request("/upload", "POST", "api.test", [("content-type", "application/json"), ("content-length", "11")]))
    conn.send_data(1, b'{"a":')
    conn.send_data(1, b'[1,2]}', end_stream=True)

def h2_trailers(conn):
    conn.send_headers(1, h2_request("/grpc.Echo/Say", "POST", "api.test", [("content-type", "application/grpc"), ("te", "trailers")]))
    conn.send_data(1, b"\x00\x00\x00\x00\x03\x0a\x01x")
    conn.send_headers(1, [("grpc-timeout", "1S"), ("x-trailer", "t")], end_stream=True)

def h2_many(conn):
    for stream, path in ((1, "/a"), (3, "/b"), (5, "/c")):
        conn.send_headers(stream, h2_request(path), end_stream=True)
    conn.increment_flow_control_window(1 << 20)
    conn.ping(b"12345678")

def h2_reset(conn):
    conn.send_headers(1, h2_request("/slow"), end_stream=True)
    conn.reset_stream(1)
    conn.send_headers(3, h2_request("/next"), end_stream=True)

def h2_settings(conn):
    conn.update_settings({h2.settings.SettingCodes.MAX_FRAME_SIZE: 32768, h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
                          h2.settings.SettingCodes.HEADER_TABLE_SIZE: 0})
    conn.send_headers(1, h2_request("/after-settings"), end_stream=True)
    conn.increment_flow_control_window(1000, stream_id=1)

def h2_goaway(conn):
    conn.send_headers(1, h2_request("/"), end_stream=True)
    conn.close_connection()

h2_block = hpack.Encoder().encode(h2_request("/continued", extra=[("x-long", "v" * 40), ("cookie", "a=b"), ("cookie", "c=d")]))
h2_start = h2_bytes(h2_client())
settings_ack = h2_frame(4, 1, 0)
seeds("http2", {
    "get": h2_session(lambda c: c.send_headers(1, h2_request("/index.html?q=1", extra=[("user-agent", "curl/8.5.0"), ("accept", "*/*")]), end_stream=True)),
    "post-data": h2_session(h2_post),
    "trailers": h2_session(h2_trailers),
    "three-streams-ping-window": h2_session(h2_many),
    "rst-stream": h2_session(h2_reset),
    "settings-then-get": h2_session(h2_settings),
    "goaway": h2_session(h2_goaway),
    "settings-ack-ping": h2_start + settings_ack + h2_frame(6, 0, 0, b"pingpong") + h2_frame(8, 0, 0, struct.pack(">I", 65535)),
    "continuation": h2_start + h2_frame(1, 0x1, 1, h2_block[:10]) + h2_frame(9, 0, 1, h2_block[10:30]) + h2_frame(9, 0x4, 1, h2_block[30:]),
    "continuation-flood": h2_start + h2_frame(1, 0x1, 1, h2_block[:4]) + b"".join(h2_frame(9, 0, 1, b"") for _ in range(8)),
    "rapid-reset": h2_start + b"".join(h2_frame(1, 0x5, s, hpack.Encoder().encode(h2_request("/r"))) + h2_frame(3, 0, s, struct.pack(">I", 8))
                                       for s in range(1, 41, 2)),
    "priority-unknown-padded": h2_start + h2_frame(2, 0, 1, struct.pack(">IB", 0, 15)) + h2_frame(0xfa, 0, 0, b"unknown")
        + h2_frame(1, 0x2d, 3, bytes([4]) + struct.pack(">IB", 0, 200) + hpack.Encoder().encode(h2_request("/p")) + bytes(4)),
    "data-on-idle-stream": h2_start + h2_frame(0, 1, 7, b"early"),
    "header-list-large": h2_start + h2_frame(1, 0x5, 1, hpack.Encoder().encode(h2_request("/big", extra=[("x-big", "b" * 12000)]))),
})
dictionary("http2", [
    "\x00\x00\x00\x04\x00\x00\x00\x00\x00", "\x00\x00\x00\x04\x01\x00\x00\x00\x00", "\x00\x00\x08\x06\x00\x00\x00\x00\x00",
    "\x00\x00\x04\x08\x00\x00\x00\x00\x00", "\x00\x00\x04\x03\x00\x00\x00\x00\x01", "\x00\x00\x08\x07\x00\x00\x00\x00\x00",
    "\x01\x05\x00\x00\x00\x01", "\x01\x04\x00\x00\x00\x01", "\x09\x04\x00\x00\x00\x01", "\x09\x00\x00\x00\x00\x01",
    "\x00\x01\x00\x00\x00\x01", "\x00\x00\x00\x00\x00\x01", "\x00\x00\x00\x03", "\x00\x05\x00\x00\x40\x00", "\x00\x04\x7f\xff\xff\xff",
    "\x00\x06\x00\x00\x10\x00", "\x82", "\x84", "\x86", "\x87", "\x41\x0bexample.com", "\x44\x01/", "\x40\x02te\x08trailers",
])
