#!/usr/bin/env python3
"""Devices on the network end to end (issue 14): the real appliance as the
gateway of a device, in network namespaces of its own. Transparent capture
(prerouting and output), the DNS forwarder, QUIC refused, the nftables
table's lifecycle, the onboarding listener, device ports, no open proxy,
IPv6.

usage: run.py --bin DIR [--keep]      the whole suite
       run.py --topology-only         the namespaces and the origin only, a plain router, no Busymate

Topology (names carry this run's pid, so parallel runs do not clash):

    device ns  10.77.1.2   fd77:1::2  --veth--  10.77.1.1  fd77:1::1  appliance ns (busymate-app, nftables)
                                                10.77.2.1  fd77:2::1  --veth--  10.77.2.2  fd77:2::2  origin ns

The origin namespace runs this script with --serve-origin: HTTP on :80,
HTTPS on :443 (origin.test, other.test, 10.77.2.2, fd77:2::2, signed by a
test CA made here), DNS on :53 (UDP and TCP) and a UDP :443 listener that
records any QUIC datagram that gets through; every request it sees is
appended to a JSON-lines file this script reads.

Run as root (network namespaces, nftables; the children drop to user
busymate). All traffic stays inside the namespaces, which are removed at
the end (and leftovers of a killed run at the start).
"""
import argparse, json, os, re, shutil, signal, socket, socketserver, ssl, struct, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
PASSED = []
FAILED = []
BASE = None  # this run's temp dir: certificates, group, logs

PREFIX = "bm%d" % os.getpid()
DEV, APP, ORG = PREFIX + "-dev", PREFIX + "-app", PREFIX + "-org"
NAMESPACES = (DEV, APP, ORG)
# Interface names: "bm" + pid (at most 7 digits) + 2 = at most 11 characters.
IF_DEV, IF_APP_DEV, IF_APP_ORG, IF_ORG = PREFIX + "d0", PREFIX + "a0", PREFIX + "a1", PREFIX + "o0"

DEV4, DEV6 = "10.77.1.2", "fd77:1::2"
GW4, GW6 = "10.77.1.1", "fd77:1::1"
UP4, UP6 = "10.77.2.1", "fd77:2::1"
ORG4, ORG6 = "10.77.2.2", "fd77:2::2"

PROXY_PORT, TRANSPARENT_PORT, DNS_PORT, ONBOARDING_PORT = 9090, 9180, 9153, 9092
POOL = range(9100, 9110)
IDLE_SECONDS = 3

ZONE = {"origin.test": {"A": [ORG4], "AAAA": [ORG6]}, "other.test": {"A": [ORG4]}}
QTYPES = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA", 33: "SRV", 64: "SVCB", 65: "HTTPS", 255: "ANY"}


def check(ok, what):
    what = re.sub(r"\s*\n\s*", " / ", what.strip())
    (PASSED if ok else FAILED).append(what)
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    return ok


def section(name, body, *args):
    """One group of checks; an exception fails it and the run goes on."""
    print("--- " + name, flush=True)
    try:
        body(*args)
    except Exception as error:
        check(False, "%s: stopped by %s: %s" % (name, type(error).__name__, error))


class step:
    """with step("what"): a part of a section; an exception fails it and the section goes on."""
    def __init__(self, what):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if isinstance(error, Exception):
            check(False, "%s: stopped by %s: %s" % (self.what, kind.__name__, error))
            return True
        return False


def safe(produce):
    """For a check's message: what produce() gives as JSON, or the error it raised (the check itself still counts)."""
    try:
        return json.dumps(produce())[:400]
    except Exception as error:
        return "(%s)" % str(error)[:200]


def safe_get(produce):
    """What produce() gives, or None when it raises."""
    try:
        return produce()
    except Exception:
        return None


def wait_until(what, predicate, timeout, pause=0.1):
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except Exception:
            pass
        if time.time() >= deadline:
            return last
        time.sleep(pause)


# --- processes -----------------------------------------------------------

def log_path(name):
    return os.path.join(BASE, name)


def run(cmd, timeout=30, input=None):
    """Runs cmd (never raises on failure or timeout: a timeout is rc 124)."""
    started = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, input=input)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, e.stdout or b"", (e.stderr or b"") + b"\n(timed out after %d s)" % timeout
    with open(log_path("commands.log"), "a") as f:
        f.write("$ %s\n  rc %d in %.2f s\n" % (" ".join(cmd), rc, time.time() - started))
        for label, data in (("out", out), ("err", err)):
            if data:
                f.write("  %s: %s\n" % (label, data[:2000].decode("utf-8", "replace").replace("\n", "\n       ")))
    return subprocess.CompletedProcess(cmd, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def ns(name, cmd, timeout=30, input=None):
    return run(["ip", "netns", "exec", name] + list(cmd), timeout=timeout, input=input)


def must_run(cmd, timeout=30):
    r = run(cmd, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (" ".join(cmd), r.returncode, (r.stderr or r.stdout).strip()[:500]))
    return r


class Fetch:
    def __init__(self, rc, code, headers, body, stderr):
        self.rc, self.code, self.headers, self.body, self.stderr = rc, code, headers, body, stderr

    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return "curl rc %d, status %s, body %r%s" % (self.rc, self.code, self.body[:80], (", " + self.stderr.strip()[:120]) if self.stderr.strip() else "")


FETCHES = [0]


def fetch(namespace, url, *extra, timeout=10):
    """curl in a namespace: exit code, status, the last header block (names lower case), body bytes."""
    FETCHES[0] += 1
    body_file = log_path("fetch-%d.body" % FETCHES[0])
    head_file = log_path("fetch-%d.head" % FETCHES[0])
    r = ns(namespace, ["curl", "-sS", "-g", "--max-time", str(timeout), "-o", body_file, "-D", head_file, "-w", "%{http_code}"] + list(extra) + [url], timeout=timeout + 10)
    headers = {}
    try:
        raw = open(head_file, "rb").read().decode("latin-1")
        blocks = [b for b in re.split(r"\r?\n\r?\n", raw) if b.strip()]
        for line in (blocks[-1].splitlines()[1:] if blocks else []):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    except OSError:
        pass
    try:
        body = open(body_file, "rb").read()
    except OSError:
        body = b""
    code = int(r.stdout) if r.stdout.strip().isdigit() else 0
    return Fetch(r.returncode, code, headers, body, r.stderr)


def dev_fetch(url, *extra):
    """The device's curl by name, through the DNS the appliance forwards; when that fails to resolve
    (a failure of its own, counted once here), again with --resolve so the capture can still be checked."""
    f = fetch(DEV, url, *extra)
    if f.rc == 6:
        m = re.match(r"(https?)://([^/:]+)", url)
        scheme, host = m.group(1), m.group(2)
        address = "[%s]" % ORG6 if "-6" in extra else ORG4
        check(False, "the device resolves %s through the appliance's DNS (curl rc 6 for %s); retried with --resolve" % (host, url))
        f = fetch(DEV, url, "--resolve", "%s:%d:%s" % (host, 443 if scheme == "https" else 80, address), *extra)
    return f


# --- DNS wire format (the origin's server and the fallback client) ---------

def dns_name(data, pos):
    labels = []
    jumps = 0
    end = None
    while True:
        length = data[pos]
        if length & 0xC0 == 0xC0:
            if end is None:
                end = pos + 2
            pos = ((length & 0x3F) << 8) | data[pos + 1]
            jumps += 1
            if jumps > 20:
                raise ValueError("compression loop")
            continue
        pos += 1
        if length == 0:
            break
        labels.append(data[pos:pos + length].decode("ascii", "replace"))
        pos += length
    return ".".join(labels), (end if end is not None else pos)


def dns_reply(query):
    """(reply bytes, name, type name, rcode name) for a query, or None for garbage."""
    if len(query) < 12:
        return None
    qid, flags, qdcount = struct.unpack("!HHH", query[:6])
    if flags & 0x8000:
        return None
    if qdcount != 1:
        return struct.pack("!HHHHHH", qid, 0x8000 | (flags & 0x7900) | 0x0080 | 1, 0, 0, 0, 0), "?", "?", "FORMERR"
    name, pos = dns_name(query, 12)
    qtype, _ = struct.unpack("!HH", query[pos:pos + 4])
    question = query[12:pos + 4]
    key = name.lower().rstrip(".")
    tname = QTYPES.get(qtype, str(qtype))
    answers = []
    if key in ZONE:
        rcode = 0
        for value in ZONE[key].get(tname, []):
            rdata = socket.inet_pton(socket.AF_INET if tname == "A" else socket.AF_INET6, value)
            answers.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 60, len(rdata)) + rdata)
    else:
        rcode = 3
    header = struct.pack("!HHHHHH", qid, 0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | rcode, 1, len(answers), 0, 0)
    return header + question + b"".join(answers), key, tname, ("NOERROR" if rcode == 0 else "NXDOMAIN")


def dns_query_stub(server, name, qtype, tcp):
    """The fallback when dig is missing: (status, [answers])."""
    qid = os.getpid() & 0xFFFF
    code = {v: k for k, v in QTYPES.items()}[qtype]
    query = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", code, 1)
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    if tcp:
        s = socket.create_connection((server, 53), timeout=5)
        s.sendall(struct.pack("!H", len(query)) + query)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
            chunk = s.recv(65535)
            if not chunk:
                break
            data += chunk
        reply = data[2:]
    else:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(query, (server, 53))
        reply, _ = s.recvfrom(65535)
    _, flags, qd, an = struct.unpack("!HHHH", reply[:8])
    pos = 12
    for _ in range(qd):
        _, pos = dns_name(reply, pos)
        pos += 4
    answers = []
    for _ in range(an):
        _, pos = dns_name(reply, pos)
        rtype, _, _, rdlength = struct.unpack("!HHIH", reply[pos:pos + 10])
        pos += 10
        rdata = reply[pos:pos + rdlength]
        pos += rdlength
        if rtype == 1:
            answers.append(socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == 28:
            answers.append(socket.inet_ntop(socket.AF_INET6, rdata))
    return {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}.get(flags & 0xF, str(flags & 0xF)), answers


def dig(namespace, server, name, qtype, tcp=False):
    """(status, answers) as the namespace's client sees them: dig when installed, else this script's stub."""
    if shutil.which("dig"):
        r = ns(namespace, ["dig", "+time=3", "+tries=1", "+tcp" if tcp else "+notcp", "@" + server, name, qtype], timeout=15)
        status = re.search(r"status: (\w+)", r.stdout)
        answers = []
        if ";; ANSWER SECTION:" in r.stdout:
            for line in r.stdout.split(";; ANSWER SECTION:", 1)[1].splitlines()[1:]:
                if not line.strip():
                    break
                answers.append(line.split()[-1])
        return (status.group(1) if status else "no answer (rc %d)" % r.returncode), answers
    r = ns(namespace, [sys.executable, os.path.abspath(__file__), "--dns-query", server, name, qtype] + (["--tcp"] if tcp else []), timeout=15)
    try:
        out = json.loads(r.stdout)
        return out["status"], out["answers"]
    except ValueError:
        return "no answer (%s)" % r.stderr.strip()[-200:], []


def keepalive_probe(proxy_host, proxy_port, url, seconds):
    """One kept-alive proxy connection, a request a second for `seconds` (run.py --keepalive-probe in a namespace):
    when each was answered, and when and how the connection stopped answering (times are time.time())."""
    host = re.match(r"https?://([^/]+)", url).group(1)
    s = socket.create_connection((proxy_host, proxy_port), timeout=5)
    start, answered, ended, why, i = time.time(), [], None, None, 0
    while time.time() - start < seconds:
        path = "%s-%d" % (re.sub(r"^https?://[^/]+", "", url), i)
        try:
            s.sendall(("GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, path, host)).encode())
            data = b""
            while ("origin " + path).encode() not in data:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed by the proxy")
                data += chunk
            answered.append(time.time())
        except (OSError, ConnectionError) as error:
            ended, why = time.time(), str(error)
            break
        i += 1
        time.sleep(1)
    return {"answered": answered, "ended": ended, "why": why}


# --- the origin (runs in the origin namespace: run.py --serve-origin CONFIG) --

def serve_origin(config_path):
    config = json.load(open(config_path))
    lock = threading.Lock()
    events = open(config["events"], "a")

    def record(**event):
        event["t"] = time.time()
        with lock:
            events.write(json.dumps(event) + "\n")
            events.flush()

    def peer_of(address):
        host = address[0]
        return host[7:] if host.startswith("::ffff:") else host

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        scheme = "http"

        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            peer = peer_of(self.client_address)
            record(kind=self.scheme, method=self.command, path=self.path, host=self.headers.get("Host"), peer=peer)
            body = ("origin " + self.path).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Seen-Host", self.headers.get("Host") or "")
            self.send_header("X-Seen-Peer", peer)
            self.send_header("X-Seen-Scheme", self.scheme)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_HEAD = answer

        def log_message(self, *args):
            pass

    class TLSHandler(Handler):
        scheme = "https"

        def setup(self):
            self.request.settimeout(15)
            self.request = self.server.context.wrap_socket(self.request, server_side=True)
            super().setup()

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True
        allow_reuse_address = True

        def server_bind(self):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            socketserver.TCPServer.server_bind(self)  # not HTTPServer's: its getfqdn would ask a resolver
            self.server_name, self.server_port = "origin", self.server_address[1]

        def handle_error(self, request, client_address):
            record(kind="error", peer=peer_of(client_address), error=repr(sys.exc_info()[1])[:300])

    class DNSOverTCP(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.settimeout(10)
            buffer = b""
            while True:
                try:
                    chunk = self.request.recv(65535)
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while len(buffer) >= 2 and len(buffer) >= 2 + struct.unpack("!H", buffer[:2])[0]:
                    size = struct.unpack("!H", buffer[:2])[0]
                    query, buffer = buffer[2:2 + size], buffer[2 + size:]
                    reply = dns_reply(query)
                    if reply:
                        record(kind="dns", transport="tcp", name=reply[1], type=reply[2], rcode=reply[3], peer=peer_of(self.client_address))
                        self.request.sendall(struct.pack("!H", len(reply[0])) + reply[0])

    class TCPServer(socketserver.ThreadingTCPServer):
        address_family = socket.AF_INET6
        daemon_threads = True
        allow_reuse_address = True

        def server_bind(self):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    def udp_socket(port):
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        return s

    def dns_over_udp(s):
        while True:
            query, address = s.recvfrom(65535)
            try:
                reply = dns_reply(query)
            except Exception as error:
                record(kind="error", peer=peer_of(address), error="dns: %r" % error)
                continue
            if reply:
                record(kind="dns", transport="udp", name=reply[1], type=reply[2], rcode=reply[3], peer=peer_of(address))
                s.sendto(reply[0], address)

    def quic(s):
        while True:
            data, address = s.recvfrom(65535)
            record(kind="udp443", peer=peer_of(address), data=data[:64].decode("latin-1"))

    http = Server(("::", 80), Handler)
    https = Server(("::", 443), TLSHandler)
    https.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    https.context.load_cert_chain(config["cert"], config["key"])
    https.context.set_alpn_protocols(["http/1.1"])
    dns_tcp = TCPServer(("::", 53), DNSOverTCP)
    for server in (http, https, dns_tcp):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=dns_over_udp, args=(udp_socket(53),), daemon=True).start()
    threading.Thread(target=quic, args=(udp_socket(443),), daemon=True).start()
    with open(config["ready"], "w") as f:
        f.write("ready\n")
    print("origin: serving http :80, https :443, dns :53 udp+tcp, udp :443", flush=True)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    while True:
        time.sleep(3600)


class Origin:
    def __init__(self, certs):
        self.events = log_path("origin-events.jsonl")
        open(self.events, "w").close()
        ready = log_path("origin.ready")
        config = log_path("origin-config.json")
        with open(config, "w") as f:
            json.dump({"cert": certs["origin_chain"], "key": certs["origin_key"], "events": self.events, "ready": ready}, f)
        self.process = subprocess.Popen(["ip", "netns", "exec", ORG, sys.executable, os.path.abspath(__file__), "--serve-origin", config],
                                        stdout=open(log_path("origin.log"), "ab"), stderr=subprocess.STDOUT)
        if not wait_until("the origin is serving", lambda: os.path.exists(ready) or self.process.poll() is not None, 15) or not os.path.exists(ready):
            raise RuntimeError("the origin did not start: " + open(log_path("origin.log"), errors="replace").read()[-800:])

    def all(self, kind=None):
        out = []
        for line in open(self.events, errors="replace"):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if kind is None or event.get("kind") == kind:
                out.append(event)
        return out

    def requests(self, path):
        return [e for e in self.all() if e.get("kind") in ("http", "https") and e.get("path") == path]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


# --- certificates ------------------------------------------------------------

def make_certs():
    d = log_path("certs")
    os.makedirs(d)
    os.chmod(d, 0o755)
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[req]\ndistinguished_name = dn\nx509_extensions = v3_ca\nprompt = no\n[dn]\nCN = Busymate devices test CA\n"
                "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n")
    with open(os.path.join(d, "leaf.cnf"), "w") as f:
        f.write("[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = origin.test\n")
    with open(os.path.join(d, "leaf.ext"), "w") as f:
        f.write("basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = serverAuth\n"
                "subjectAltName = DNS:origin.test,DNS:other.test,IP:%s,IP:%s\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n" % (ORG4, ORG6))
    p = lambda name: os.path.join(d, name)
    must_run(["openssl", "req", "-x509", "-config", p("ca.cnf"), "-newkey", "rsa:2048", "-nodes", "-keyout", p("testca.key"), "-out", p("testca.pem"), "-days", "30"])
    must_run(["openssl", "req", "-new", "-config", p("leaf.cnf"), "-newkey", "rsa:2048", "-nodes", "-keyout", p("origin.key"), "-out", p("origin.csr")])
    must_run(["openssl", "x509", "-req", "-in", p("origin.csr"), "-CA", p("testca.pem"), "-CAkey", p("testca.key"), "-set_serial", "0x%x" % int.from_bytes(os.urandom(8), "big"),
              "-days", "30", "-sha256", "-extfile", p("leaf.ext"), "-out", p("origin.pem")])
    with open(p("origin-chain.pem"), "w") as f:
        f.write(open(p("origin.pem")).read() + open(p("testca.pem")).read())
    for name in ("testca.pem", "origin.pem", "origin-chain.pem"):
        os.chmod(p(name), 0o644)
    return {"ca": p("testca.pem"), "origin_chain": p("origin-chain.pem"), "origin_key": p("origin.key")}


# --- the namespaces ----------------------------------------------------------

def netns_list():
    r = run(["ip", "netns", "list"])
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def netns_pids(name):
    r = run(["ip", "netns", "pids", name])
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def remove_netns(name):
    for pid in netns_pids(name):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until("the processes of %s are gone" % name, lambda: not netns_pids(name), 5)
    run(["ip", "netns", "del", name])
    shutil.rmtree(os.path.join("/etc/netns", name), ignore_errors=True)


def run_alive(pid):
    """Whether pid is another run of this script (its namespaces are in use)."""
    try:
        cmdline = open("/proc/%d/cmdline" % pid, "rb").read()
    except OSError:
        return False
    return os.path.basename(__file__).encode() in cmdline


def remove_leftovers():
    names = set(netns_list())
    if os.path.isdir("/etc/netns"):
        names |= set(os.listdir("/etc/netns"))
    for name in sorted(names):
        m = re.fullmatch(r"bm(\d+)-(dev|app|org)", name)
        if m and int(m.group(1)) != os.getpid() and not run_alive(int(m.group(1))):
            print("removing leftover namespace %s (its run, pid %s, is gone)" % (name, m.group(1)), flush=True)
            remove_netns(name)


def create_topology():
    for name in NAMESPACES:
        must_run(["ip", "netns", "add", name])
        os.makedirs(os.path.join("/etc/netns", name), exist_ok=True)
        # curl, dig and the tunnel's own resolver in every namespace ask the origin's DNS.
        with open(os.path.join("/etc/netns", name, "resolv.conf"), "w") as f:
            f.write("nameserver %s\n" % ORG4)
        must_run(["ip", "-n", name, "link", "set", "lo", "up"])
        must_run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
    must_run(["ip", "-n", APP, "link", "add", IF_APP_DEV, "type", "veth", "peer", "name", IF_DEV, "netns", DEV])
    must_run(["ip", "-n", APP, "link", "add", IF_APP_ORG, "type", "veth", "peer", "name", IF_ORG, "netns", ORG])
    for name, iface, v4, v6 in ((DEV, IF_DEV, DEV4, DEV6), (APP, IF_APP_DEV, GW4, GW6), (APP, IF_APP_ORG, UP4, UP6), (ORG, IF_ORG, ORG4, ORG6)):
        must_run(["ip", "-n", name, "addr", "add", v4 + "/24", "dev", iface])
        must_run(["ip", "-n", name, "-6", "addr", "add", v6 + "/64", "dev", iface, "nodad"])
        must_run(["ip", "-n", name, "link", "set", iface, "up"])
    for name, v4, v6 in ((DEV, GW4, GW6), (ORG, UP4, UP6)):
        must_run(["ip", "-n", name, "route", "add", "default", "via", v4])
        must_run(["ip", "-n", name, "-6", "route", "add", "default", "via", v6])
    must_run(["ip", "netns", "exec", APP, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"])
    for name in NAMESPACES:
        wait_until("no tentative addresses in " + name, lambda: not run(["ip", "-n", name, "-6", "addr", "show", "tentative"]).stdout.strip(), 5)


def destroy_topology():
    for name in NAMESPACES:
        remove_netns(name)
    leftover = [n for n in netns_list() if n in NAMESPACES]
    if leftover:
        print("warning: namespaces left behind: %s" % leftover, flush=True)


# --- the appliance -------------------------------------------------------------

def addr_is(address, expected):
    """client_address "10.77.1.2:51234", "[fd77:1::2]:51234" or a bare address."""
    s = str(address or "")
    if s.startswith("["):
        s = s[1:]
    return s == expected or (s.startswith(expected) and s[len(expected)] in "]:.#% ")


class Appliance:
    def __init__(self, certs):
        self.group = log_path("group")
        os.makedirs(self.group)
        self.log = log_path("supervisor.log")
        self.process = None
        # systemd's STATUS= lines, as the supervisor sends them.
        self.statuses = []
        self.notify_path = log_path("notify.sock")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        threading.Thread(target=self._read_notify, daemon=True).start()
        settings = {
            "mode": "proxy",
            "log_level": "info",
            "proxy": {"listen": ["127.0.0.1:%d" % PROXY_PORT, "%s:%d" % (GW4, PROXY_PORT)]},
            "web": {"listen": "127.0.0.1:0"},
            "tunnel": {"drain_seconds": 1},
            "access": {"allow": ["10.77.1.0/24", "fd77:1::/64"]},
            "transparent": {"port": TRANSPARENT_PORT, "ports": [80, 443], "interfaces": [IF_APP_DEV]},
            "dns": {"port": DNS_PORT, "servers": [ORG4]},
            "onboarding": {"listen": "%s:%d" % (GW4, ONBOARDING_PORT)},
            "devices": {"port_pool": "%d-%d" % (POOL.start, POOL.stop - 1), "idle_seconds": IDLE_SECONDS},
            "ssl_proxying": {"include": ["origin.test"], "upstream_trust": certs["ca"]},
        }
        with open(os.path.join(self.group, "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)

    def _read_notify(self):
        while True:
            try:
                data = self.notify.recv(65536).decode(errors="replace")
            except OSError:
                return
            for line in data.split("\n"):
                if line.startswith("STATUS="):
                    self.statuses.append(line[len("STATUS="):])

    def start(self):
        env = dict(os.environ, BUSYMATE_LOG="stderr", NOTIFY_SOCKET=self.notify_path)
        with open(self.log, "ab") as log:
            log.write(b"=== run.py: starting busymate-app %s\n" % time.strftime("%H:%M:%S").encode())
            self.process = subprocess.Popen(["ip", "netns", "exec", APP, os.path.join(ARGS.bin, "busymate-app"), "--group", self.group, "--restart-backoff-max", "0.5"],
                                            stdout=subprocess.DEVNULL, stderr=log, env=env)
        ready = wait_until("the tunnel and the web front are ready", lambda: self.ready() or self.process.poll() is not None, 30, pause=0.2)
        if self.process.poll() is not None:
            raise RuntimeError("busymate-app exited with %s" % self.process.returncode)
        if not self.ready():
            raise RuntimeError("the tunnel and the web front are not ready after 30 s: %s" % json.dumps(self.status_or_none())[:600])

    def ready(self):
        s = self.status()
        return (s.get("tunnel") or {}).get("state") == "ready" and (s.get("web") or {}).get("state") == "ready"

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def ensure(self):
        """Before each section: a supervisor that died is a failure, and restarted so the rest can run."""
        if self.process is not None and not self.alive():
            check(False, "the supervisor was still running (it exited with %s; restarting it)" % self.process.returncode)
            self.start()

    def cli(self, *args, timeout=30):
        return ns(APP, [os.path.join(ARGS.bin, "busymate")] + list(args) + ["--group", self.group], timeout=timeout)

    def json(self, *args):
        r = self.cli(*(list(args) + ["--json"]))
        try:
            return json.loads(r.stdout)
        except ValueError:
            raise RuntimeError("busymate %s --json: rc %d, not JSON: %r %r" % (" ".join(args), r.returncode, r.stdout[:200], r.stderr[:300]))

    def status(self):
        return self.json("status")

    def status_or_none(self):
        try:
            return self.status()
        except Exception:
            return None

    def network(self):
        return self.status().get("network") or {}

    def rows(self, *args):
        return self.json("list", *(list(args) + ["--limit", "1000"]))

    def find_row(self, path, timeout=10, where=None):
        """The newest row whose url ends with path (paths are unique in this run)."""
        def found():
            for row in self.rows():
                if str(row.get("url", "")).endswith(path) and (where is None or where(row)):
                    return row
            return None
        return wait_until("a row for " + path, found, timeout, pause=0.25)

    def show(self, row_id):
        out = self.json("show", str(row_id))
        return out[0] if isinstance(out, list) else out

    def devices(self):
        return self.json("devices")

    def device(self, name):
        for row in self.devices():
            if row.get("name") == name:
                return row
        return None

    def kill9(self):
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout=20):
        if not self.alive():
            return None
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            return "killed after %d s" % timeout


def table_name():
    """The appliance's own table (status --json network.table: one per group directory)."""
    return STATE.get("table") or "busymate"


def nft_table(name=None):
    """The listing of the appliance's table in the appliance namespace, or None."""
    r = ns(APP, ["nft", "list", "table", "inet", name or table_name()], timeout=10)
    return r.stdout if r.returncode == 0 else None


def nft_table_count(name=None):
    r = ns(APP, ["nft", "list", "tables"], timeout=10)
    return sum(1 for line in r.stdout.splitlines() if line.strip() == "table inet " + (name or table_name()))


def nft_busymate_tables():
    r = ns(APP, ["nft", "list", "tables"], timeout=10)
    return [line.strip() for line in r.stdout.splitlines() if line.strip().startswith("table inet busymate")]


def normalized(listing):
    """The listing's lines without counters' values and handles, sorted: two equal mean no rule added or lost."""
    lines = []
    for line in (listing or "").splitlines():
        line = re.sub(r"counter packets \d+ bytes \d+", "counter", line)
        line = re.sub(r"\s*# handle \d+", "", line).strip()
        line = re.sub(r"^packets \d+ bytes \d+$", "packets", line)
        if line:
            lines.append(line)
    return sorted(lines)


def quic_reject_rule(listing):
    return any("udp" in line and "443" in line and "reject" in line for line in (listing or "").splitlines())


# --- the checks: a plain router, no Busymate (--topology-only) ----------------

def topology_checks(origin, certs):
    f = fetch(DEV, "http://origin.test/topo", "-4")
    check(f.rc == 0 and f.body == b"origin /topo" and f.headers.get("x-seen-peer") == DEV4,
          "routed: the device's curl http://origin.test/topo (the name from the origin's DNS) reaches the origin from %s: %r, peer %s" % (DEV4, f, f.headers.get("x-seen-peer")))
    f = fetch(DEV, "https://origin.test/topo-tls", "-4", "--cacert", certs["ca"])
    check(f.rc == 0 and f.body == b"origin /topo-tls", "routed HTTPS to origin.test verifies with the test CA: %r" % f)
    f = fetch(DEV, "https://other.test/topo-other", "--cacert", certs["ca"])
    check(f.rc == 0 and f.body == b"origin /topo-other", "the origin's certificate covers other.test: %r" % f)
    f = fetch(DEV, "https://%s/topo-ip" % ORG4, "--cacert", certs["ca"])
    check(f.rc == 0 and f.body == b"origin /topo-ip", "the origin's certificate covers %s: %r" % (ORG4, f))
    for tcp in (False, True):
        status, answers = dig(DEV, ORG4, "origin.test", "A", tcp)
        check(status == "NOERROR" and answers == [ORG4], "dig %s@%s origin.test A → %s %s" % ("+tcp " if tcp else "", ORG4, status, answers))
    status, answers = dig(DEV, ORG4, "origin.test", "AAAA")
    check(status == "NOERROR" and answers == [ORG6], "dig origin.test AAAA → %s %s" % (status, answers))
    status, answers = dig(DEV, ORG4, "nothere.test", "A")
    check(status == "NXDOMAIN" and not answers, "dig nothere.test → %s" % status)
    status, answers = dig(DEV, ORG6, "other.test", "A", True)
    check(status == "NOERROR" and answers == [ORG4], "dig +tcp over IPv6 (@%s) other.test A → %s %s" % (ORG6, status, answers))
    f = fetch(DEV, "http://origin.test/topo-v6", "-6")
    check(f.rc == 0 and f.body == b"origin /topo-v6" and f.headers.get("x-seen-peer") == DEV6, "IPv6: curl -6 http://origin.test/topo-v6 (AAAA) from %s: %r" % (f.headers.get("x-seen-peer"), f))
    f = fetch(DEV, "http://[%s]/topo-v6-literal" % ORG6)
    check(f.rc == 0 and f.body == b"origin /topo-v6-literal", "IPv6 literal http://[%s]/: %r" % (ORG6, f))
    f = fetch(DEV, "https://origin.test/topo-v6-tls", "-6", "--cacert", certs["ca"])
    check(f.rc == 0 and f.body == b"origin /topo-v6-tls", "IPv6 HTTPS: %r" % f)
    f = fetch(APP, "http://%s/topo-local" % ORG4)
    check(f.rc == 0 and f.body == b"origin /topo-local" and f.headers.get("x-seen-peer") == UP4, "the appliance namespace reaches the origin from %s: %r" % (UP4, f))
    f = fetch(ORG, "http://%s:1/" % GW4, timeout=5)
    check(f.rc == 7, "the origin namespace reaches the appliance's device-side address %s (routed; a closed port answers: curl rc %d, 7 expected)" % (GW4, f.rc))
    probe = ns(DEV, [sys.executable, "-c", "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'topo-probe', ('%s', 443))" % ORG4])
    got = wait_until("the UDP 443 probe", lambda: [e for e in origin.all("udp443") if e.get("data") == "topo-probe"], 5)
    check(probe.returncode == 0 and bool(got), "without Busymate a UDP datagram to %s:443 reaches the origin's QUIC listener (so the QUIC check can see a leak)" % ORG4)
    r = ns(APP, ["nft", "list", "tables"])
    check(r.returncode == 0 and "busymate" not in r.stdout, "nft works in the appliance namespace and there is no busymate table yet (rc %d %s)" % (r.returncode, r.stderr.strip()[:200]))


# --- the checks: the appliance ---------------------------------------------------

STATE = {}


def check_mode(app, origin):
    r = app.cli("mode", "transparent")
    check(r.returncode == 0, "busymate mode transparent exits 0 (rc %d: %s)" % (r.returncode, (r.stdout + r.stderr).strip()[:300]))
    STATE["table"] = safe_get(lambda: app.network().get("table"))
    listing = wait_until("the table", nft_table, 10, pause=0.2)
    if not listing:
        # So the checks after this one can run: apply the mode by hand.
        path = os.path.join(app.group, "settings.json")
        settings = json.load(open(path))
        settings["mode"] = "transparent"
        with open(path, "w") as f:
            json.dump(settings, f, indent=2)
        listing = wait_until("the table", nft_table, 10, pause=0.2)
    STATE["origin_mark"] = len(origin.all())
    STATE["listing"] = listing
    check(listing is not None, "table inet %s is installed in the appliance namespace" % table_name())
    check(bool(listing) and "redirect" in listing and "skuid" in listing and quic_reject_rule(listing),
          "the table redirects, excludes the tunnel's uid (skuid) and rejects UDP 443 (redirect %s, skuid %s, udp 443 reject %s)" % ("redirect" in (listing or ""), "skuid" in (listing or ""), quic_reject_rule(listing)))
    check(bool(listing) and IF_APP_DEV in listing, "the prerouting capture names the device-side interface %s" % IF_APP_DEV)
    check(bool(listing) and str(TRANSPARENT_PORT) in listing and str(DNS_PORT) in listing, "the table redirects to transparent.port %d and dns.port %d" % (TRANSPARENT_PORT, DNS_PORT))
    net = app.network()
    check(net.get("mode") == "transparent" and net.get("live_mode") == "transparent" and net.get("rules") == "installed",
          "status --json network: mode, live_mode transparent, rules installed: %s" % json.dumps(net)[:300])
    out = app.cli("mode")
    check(out.returncode == 0 and out.stdout.count("transparent") >= 1, "busymate mode prints the mode: %r" % out.stdout.strip()[:200])


def check_gateway_plain(app, origin):
    f = dev_fetch("http://origin.test/gw-plain", "-4")
    check(f.rc == 0 and f.body == b"origin /gw-plain", "gateway: the device's plain curl http://origin.test/gw-plain (no proxy settings) is answered: %r" % f)
    check(f.headers.get("x-seen-peer") == UP4 and f.headers.get("x-seen-host") == "origin.test",
          "the origin saw the request come from the appliance (%s, not the device) with Host origin.test: peer %s host %s" % (UP4, f.headers.get("x-seen-peer"), f.headers.get("x-seen-host")))
    row = app.find_row("/gw-plain")
    check(row is not None and row.get("url") == "http://origin.test/gw-plain" and row.get("front_end") == "transparent",
          "its row: url http://origin.test/gw-plain, front_end transparent: %s" % json.dumps(row)[:300])
    detail = app.show(row["id"]) if row else {}
    check(addr_is(detail.get("client_address"), DEV4), "show --json client_address is the device %s: %s" % (DEV4, detail.get("client_address")))


def check_gateway_tls(app, origin):
    ca = os.path.join(app.group, "ca.pem")
    f = dev_fetch("https://origin.test/gw-tls", "-4", "--cacert", ca)
    check(f.rc == 0 and f.body == b"origin /gw-tls", "gateway HTTPS: the device's curl https://origin.test/gw-tls verifies with the group's CA: %r" % f)
    check(f.headers.get("x-seen-peer") == UP4, "the origin saw it from the appliance: %s" % f.headers.get("x-seen-peer"))
    row = app.find_row("/gw-tls")
    check(row is not None and row.get("tls") == "mitm" and row.get("front_end") == "transparent", "its row: tls mitm, front_end transparent: %s" % json.dumps(row)[:300])
    detail = app.show(row["id"]) if row else {}
    sni = (detail.get("tls_handshake") or {}).get("sni")
    check(sni == "origin.test" and ORG4 in str(detail.get("server_address")), "tls_handshake.sni origin.test, server_address %s: %s, %s" % (ORG4, sni, detail.get("server_address")))


def check_passthrough(app, origin, certs):
    f = dev_fetch("https://other.test/pass", "-4", "--cacert", certs["ca"])
    check(f.rc == 0 and f.body == b"origin /pass", "HTTPS to other.test (not in ssl_proxying) passes through: curl verifies the origin's own certificate with the test CA: %r" % f)
    # The tunnel's row is written once it has closed: not the DNS query's row for the same name.
    row = app.find_row("", where=lambda r: r.get("method") != "DNS" and "other.test" in str(r.get("url", "")) + str(r.get("host", "")))
    check(row is not None and row.get("tls") == "passthrough", "its row: tls passthrough: %s" % json.dumps(row)[:300])
    detail = app.show(row["id"]) if row else {}
    check((detail.get("tls_handshake") or {}).get("sni") == "other.test", "its tls_handshake.sni is other.test: %s" % detail.get("tls_handshake"))


def check_output(app, origin):
    f = fetch(APP, "http://%s/local-out" % ORG4)
    check(f.rc == 0 and f.body == b"origin /local-out", "output hook: a root curl inside the appliance namespace (no proxy) is answered: %r" % f)
    row = app.find_row("/local-out")
    check(row is not None and row.get("front_end") == "transparent", "it is captured, front_end transparent: %s" % json.dumps(row)[:300])
    time.sleep(1)
    seen = origin.requests("/local-out")
    check(len(seen) == 1, "the origin saw /local-out exactly once (no loop through the tunnel's own connection): %d" % len(seen))


def dns_rows(app, *args):
    return app.json("dns", *(list(args) + ["--limit", "500"]))


def check_dns(app, origin):
    mark = len(origin.all())
    for tcp in (False, True):
        status, answers = dig(DEV, ORG4, "origin.test", "A", tcp)
        check(status == "NOERROR" and answers == [ORG4], "DNS: the device's dig %s@%s origin.test A → %s %s" % ("+tcp " if tcp else "", ORG4, status, answers))
    status, answers = dig(DEV, ORG4, "nothere.test", "A")
    check(status == "NXDOMAIN", "dig nothere.test → %s" % status)
    # The usual DHCP set-up: the device's resolver is its gateway.
    for tcp in (False, True):
        status, answers = dig(DEV, GW4, "origin.test", "A", tcp)
        check(status == "NOERROR" and answers == [ORG4], "DNS to the gateway itself (%s) is answered through the forwarder %s: %s %s" % (GW4, "over TCP" if tcp else "over UDP", status, answers))
    time.sleep(0.5)
    later = [e for e in origin.all()[mark:] if e.get("kind") == "dns"]
    check(any(e.get("peer") == UP4 for e in later) and not any(e.get("peer") == DEV4 for e in later),
          "the queries reached the origin's DNS from the forwarder (%s), none straight from the device: %s" % (UP4, sorted(set((e.get("peer"), e.get("transport")) for e in later))))
    direct = [e for e in origin.all()[STATE.get("origin_mark", 0):] if e.get("kind") == "dns" and e.get("peer") == DEV4]
    check(not direct, "since transparent mode began no DNS query of the device reached the origin unforwarded: %d" % len(direct))

    def have(transport):
        for row in dns_rows(app):
            if (str(row.get("name", "")).rstrip(".") == "origin.test" and row.get("type") == "A" and row.get("rcode") == "NOERROR"
                    and any(ORG4 in str(a) for a in row.get("answers") or []) and addr_is(row.get("client"), DEV4) and row.get("transport") == transport):
                return row
        return None
    for transport in ("udp", "tcp"):
        row = wait_until("a dns row", lambda: have(transport), 5, pause=0.25)
        check(row is not None, "busymate dns --json: origin.test A NOERROR answers %s client %s over %s: %s" % (ORG4, DEV4, transport, (json.dumps(row) if row else safe(lambda: dns_rows(app)[:3]))))
    nx = wait_until("the NXDOMAIN row", lambda: [r for r in dns_rows(app) if str(r.get("name", "")).rstrip(".") == "nothere.test"], 5, pause=0.25)
    check(bool(nx) and nx[0].get("rcode") == "NXDOMAIN", "nothere.test is recorded with rcode NXDOMAIN: %s" % json.dumps((nx or [])[:1])[:300])
    with step("busymate list '~dns' --json"):
        rows = app.rows("~dns")
        check(bool(rows) and all(r.get("method") == "DNS" for r in rows) and any(r.get("url") == "dns://origin.test/A" for r in rows),
              "busymate list '~dns' --json: DNS rows only (method DNS), one with url dns://origin.test/A: %d rows, %s" % (len(rows), json.dumps(rows[:2])[:300]))


def check_quic(app, origin):
    before = (app.status_or_none() or {}).get("network", {}).get("quic_rejected") or 0
    code = ("import socket\n"
            "for family, address in ((socket.AF_INET, ('%s', 443)), (socket.AF_INET6, ('%s', 443))):\n"
            "    s = socket.socket(family, socket.SOCK_DGRAM)\n"
            "    for i in range(3): s.sendto(b'quic-probe', address)\n") % (ORG4, ORG6)
    r = ns(DEV, [sys.executable, "-c", code])
    check(r.returncode == 0, "QUIC: the device sent UDP datagrams to %s:443 and [%s]:443 (%s)" % (ORG4, ORG6, r.stderr.strip()[:200]))
    count = wait_until("quic_rejected", lambda: (app.network().get("quic_rejected") or 0) >= max(1, before + 1) and app.network().get("quic_rejected"), 5, pause=0.25)
    check(bool(count), "status --json network.quic_rejected counts them: %s (before %s)" % (safe(lambda: app.network().get("quic_rejected")), before))
    time.sleep(1)
    leaked = [e for e in origin.all("udp443") if e.get("data") == "quic-probe"]
    check(not leaked, "the origin's UDP 443 listener never received them: %d" % len(leaked))


def header(f, name):
    return f.headers.get(name.lower(), "")


def check_onboarding(app, origin):
    base = "http://%s:%d" % (GW4, ONBOARDING_PORT)
    f = fetch(DEV, base + "/proxy.pac")
    check(f.code == 200 and header(f, "content-type").startswith("application/x-ns-proxy-autoconfig") and b"PROXY %s:%d" % (GW4.encode(), PROXY_PORT) in f.body,
          "onboarding /proxy.pac from the device: 200, application/x-ns-proxy-autoconfig, PROXY %s:%d: %s %r" % (GW4, PROXY_PORT, header(f, "content-type"), f))
    pem = open(os.path.join(app.group, "ca.pem"), "rb").read()
    f = fetch(DEV, base + "/ca.pem")
    check(f.code == 200 and header(f, "content-type").startswith("application/x-x509-ca-cert") and f.body == pem,
          "/ca.pem: 200, application/x-x509-ca-cert, the group's ca.pem byte for byte: %s, %d bytes (ca.pem %d)" % (header(f, "content-type"), len(f.body), len(pem)))
    f = fetch(DEV, base + "/ca.der")
    der_file = log_path("onboarding-ca.der")
    with open(der_file, "wb") as out:
        out.write(f.body)
    der_print = run(["openssl", "x509", "-inform", "DER", "-in", der_file, "-noout", "-fingerprint", "-sha256"])
    pem_print = run(["openssl", "x509", "-in", os.path.join(app.group, "ca.pem"), "-noout", "-fingerprint", "-sha256"])
    check(f.code == 200 and header(f, "content-type").startswith("application/x-x509-ca-cert") and der_print.returncode == 0 and der_print.stdout == pem_print.stdout,
          "/ca.der: 200, application/x-x509-ca-cert, DER of the same certificate: %s, %s vs %s" % (header(f, "content-type"), der_print.stdout.strip()[-40:], pem_print.stdout.strip()[-40:]))
    f = fetch(DEV, base + "/")
    check(f.code == 200 and header(f, "content-type").startswith("text/html") and b"<svg" in f.body, "/: 200, an HTML setup page with an inline SVG QR code: %s, %d bytes" % (header(f, "content-type"), len(f.body)))
    f = fetch(DEV, base + "/api/exchanges")
    check(f.code == 404, "/api/exchanges on the onboarding listener: 404 (%s)" % f.code)
    f = fetch(DEV, base + "/login")
    check(f.code == 404, "/login on the onboarding listener: 404 (%s)" % f.code)

    def row():
        for d in app.status().get("devices") or []:
            if (d.get("address") == DEV4 or d.get("name") == DEV4) and (d.get("ca_downloads") or 0) >= 1:
                return d
        return None
    d = wait_until("the device row", row, 5, pause=0.25)
    check(d is not None, "status --json devices: the row of %s has ca_downloads >= 1: %s" % (DEV4, (json.dumps(d) if d else safe(lambda: app.status().get("devices")))))
    check_trust_seen_from_device(app)
    check_unserved_onboarding(app)


def check_trust_seen_from_device(app):
    """'CA trusted' per device is what the tunnel saw it do: a completed intercepted handshake from
    its address. A second address on the device is a device that has not used the proxy yet."""
    addr = "10.77.1.3"
    must_run(["ip", "-n", DEV, "addr", "add", addr + "/24", "dev", IF_DEV])
    proxy = "http://%s:%d" % (GW4, PROXY_PORT)

    def row():
        return next((d for d in app.status().get("devices") or [] if d.get("address") == addr), None)
    try:
        f = fetch(DEV, "http://%s:%d/ca.pem" % (GW4, ONBOARDING_PORT), "--interface", addr)
        downloaded = log_path("device-3-ca.pem")
        with open(downloaded, "wb") as out:
            out.write(f.body)
        d = wait_until("its row", lambda: (row() or {}).get("ca_downloads") and row(), 5, pause=0.25)
        check(bool(d) and not d.get("ca_trusted_at"), "%s downloaded the CA and has not used it: CA downloaded, not trusted: %s" % (addr, json.dumps(d)))
        # Refusing our certificate (curl without the CA) is no trust.
        r = fetch(DEV, "https://origin.test/untrusted", "--interface", addr, "-x", proxy)
        check(r.rc == 60, "its curl through the proxy without the CA refuses our certificate (rc 60): %r" % r)
        time.sleep(1.5)
        d = row()
        check(bool(d) and not d.get("ca_trusted_at"), "after refusing it: still not trusted: %s" % json.dumps(d))
        r = fetch(DEV, "https://origin.test/trusted", "--interface", addr, "-x", proxy, "--cacert", downloaded)
        check(r.rc == 0 and r.body == b"origin /trusted", "with the CA it downloaded, its curl through the proxy verifies: %r" % r)
        d = wait_until("trusted", lambda: (row() or {}).get("ca_trusted_at") and row(), 5, pause=0.25)
        check(bool(d), "status --json devices: %s has ca_trusted_at once its handshake completed: %s" % (addr, json.dumps(row())))
        lines = app.cli("status").stdout.splitlines()
        mine = [l for l in lines if addr in l and "device" in l]
        check(len(mine) == 1 and "CA downloaded · CA trusted" in mine[0], "busymate status: its line says CA downloaded · CA trusted: %r" % mine)
        own = [l for l in lines if "CA trust" in l and "this machine" in l]
        check(len(own) == 1, "this machine's own trust store is a line of its own, labelled: %r" % own)
    finally:
        run(["ip", "-n", DEV, "addr", "del", addr + "/24", "dev", IF_DEV])


def set_onboarding(app, listen, mode=None):
    path = os.path.join(app.group, "settings.json")
    settings = json.load(open(path))
    settings["onboarding"] = {"listen": listen}
    if mode:
        settings["mode"] = mode
    with open(path + ".tmp", "w") as f:
        json.dump(settings, f, indent=2)
    os.chmod(path + ".tmp", os.stat(path).st_mode & 0o777)
    os.replace(path + ".tmp", path)
    return wait_until("onboarding on " + listen, lambda: ((app.status().get("web") or {}).get("onboarding") or {}).get("bound") == listen
                      and (mode is None or (app.network() or {}).get("mode") == mode), 10, pause=0.25)


def onboarding_warning(app):
    return ((app.status().get("web") or {}).get("onboarding") or {}).get("warning") or ""


def check_unserved_onboarding(app):
    """Seed 004's pitfall: the onboarding page on an address no proxy listener is on. The PAC
    is refused with why (a bare DIRECT would route the device around Busymate unseen); in proxy
    mode the setup page says so and status warns; in transparent mode devices need no PAC, and
    the page says that instead."""
    unserved = "%s:%d" % (UP4, ONBOARDING_PORT)
    mode = (app.network() or {}).get("mode")
    try:
        check(bool(set_onboarding(app, unserved, "transparent")), "onboarding.listen moved to %s (the appliance's other address, no proxy listener on it), transparent mode" % unserved)
        f = fetch(DEV, "http://%s/proxy.pac" % unserved)
        check(f.code == 503 and b"no proxy listener serves " + UP4.encode() in f.body and b"FindProxyForURL" not in f.body,
              "the device's /proxy.pac there: 503 with why, no PAC (never a bare DIRECT): %r" % f)
        page = fetch(DEV, "http://%s/" % unserved)
        check(page.code == 200 and b"no proxy setting is needed" in page.body and b"card warn" not in page.body,
              "transparent mode: the setup page says the gateway captures, no proxy setting needed: %d, %d bytes" % (page.code, len(page.body)))
        check(onboarding_warning(app) == "", "transparent mode: no status warning: %r" % onboarding_warning(app))
        check(bool(set_onboarding(app, unserved, "proxy")), "proxy mode, onboarding still on %s" % unserved)
        page = fetch(DEV, "http://%s/" % unserved)
        check(page.code == 200 and b'class="card warn"' in page.body and b"no proxy listener serves " + UP4.encode() in page.body and b"QR code of" not in page.body,
              "proxy mode: the setup page says why, with no PAC QR code: %d, %d bytes" % (page.code, len(page.body)))
        warning = wait_until("the warning", lambda: onboarding_warning(app), 5, pause=0.25) or ""
        check(UP4 in warning and "refused a PAC" in warning, "status --json web.onboarding.warning: %r" % warning)
        text = app.cli("status").stdout
        check("⚠ onboarding   devices that open the onboarding listener (%s) are refused a PAC" % unserved in text,
              "busymate status warns: %r" % [l for l in text.splitlines() if "onboarding" in l])
    finally:
        back = set_onboarding(app, "%s:%d" % (GW4, ONBOARDING_PORT), mode)
    check(bool(back) and not onboarding_warning(app), "onboarding back on %s:%d, mode %s: no warning" % (GW4, ONBOARDING_PORT, mode))
    if mode == "transparent":
        check(bool(wait_until("the table again", lambda: (app.network() or {}).get("rules") == "installed", 10, pause=0.25)),
              "transparent mode again: rules installed: %s" % safe(lambda: app.network().get("rules")))


def check_device_port(app, origin):
    r = app.cli("devices", "add", "phone")
    ports = [int(p) for p in re.findall(r"\b(\d{4,5})\b", r.stdout) if int(p) in POOL]
    check(r.returncode == 0 and len(ports) >= 1, "busymate devices add phone prints a port in %d-%d: %r" % (POOL.start, POOL.stop - 1, r.stdout.strip()[:200] + r.stderr.strip()[:200]))
    if ports:
        port = ports[0]
    else:
        # So the checks after this one can run: the device as settings.json names it.
        port = POOL.start
        path = os.path.join(app.group, "settings.json")
        settings = json.load(open(path))
        settings.setdefault("devices", {})["list"] = [{"name": "phone", "port": port}]
        with open(path, "w") as f:
            json.dump(settings, f, indent=2)
    added = time.time()
    again = app.cli("devices", "add", "phone")
    check(again.returncode == 0 and [int(p) for p in re.findall(r"\b(\d{4,5})\b", again.stdout) if int(p) in POOL][:1] == [port],
          "adding phone again prints the same port %d: %r" % (port, again.stdout.strip()[:200] + again.stderr.strip()[:200]))
    proxy = "http://%s:%d" % (GW4, port)
    attempts = []
    ok = wait_until("the port serves", lambda: attempts.append(fetch(DEV, "http://origin.test/from-phone", "-x", proxy, timeout=4)) or (attempts[-1].rc == 0 and attempts[-1].body == b"origin /from-phone"), 5, pause=0.25)
    last_request = time.time()
    check(bool(ok), "within 5 s the device's curl -x %s http://origin.test/from-phone succeeds (%.1f s, %d tries, last %r)" % (proxy, last_request - added, len(attempts), attempts[-1] if attempts else None))
    # Before idle_seconds (3 s) pass.
    online = lambda d: d is not None and d.get("online") is True and d.get("source") == "port" and d.get("port") == port
    d = wait_until("phone online", lambda: online(app.device("phone")), 2, pause=0.1)
    check(bool(d), "busymate devices --json right after: phone, port %d, online, source port: %s" % (port, safe(lambda: app.device("phone"))))
    row = None
    with step("the phone's row"):
        row = app.find_row("/from-phone")
        check(row is not None and row.get("device") == "phone" and row.get("front_end") == "port", "its row: device phone, front_end port: %s" % json.dumps(row)[:300])
    time.sleep(max(0, last_request + IDLE_SECONDS + 2 - time.time()))
    d = wait_until("phone offline", lambda: (app.device("phone") or {}).get("online") is False and app.device("phone"), 3, pause=0.25)
    check(bool(d), "%d s after its last request (idle_seconds %d + 2; 3 s of grace) phone is offline: %s" % (IDLE_SECONDS + 2, IDLE_SECONDS, safe(lambda: app.device("phone"))))
    pattern = re.compile(r"DEVICE\W{0,4}phone")
    logged = wait_until("the log line", lambda: pattern.search(open(app.log, errors="replace").read()), 5, pause=0.25)
    check(bool(logged), "the supervisor log names the device (DEVICE=phone or alike)")
    with step("busymate list '~device phone' --json"):
        rows = app.rows("~device phone")
        check(len(rows) == 1 and row is not None and rows[0].get("id") == row.get("id"), "busymate list '~device phone' --json returns only that row: %s" % [r.get("url") for r in rows][:5])
    r = app.cli("devices", "remove", "phone")
    gone = wait_until("phone gone", lambda: app.device("phone") is None, 3, pause=0.2)
    check(r.returncode == 0 and bool(gone), "busymate devices remove phone: gone from the list (rc %d: %s)" % (r.returncode, (r.stdout + r.stderr).strip()[:200]))
    refused = wait_until("the port closes", lambda: fetch(DEV, "http://origin.test/after-remove", "-x", proxy, timeout=3).rc == 7, 5, pause=0.25)
    check(bool(ok) and bool(refused), "its port %d, which served before, refuses connections afterwards (served %s, refused %s)" % (port, bool(ok), bool(refused)))


def check_open_proxy(app, origin):
    before = (app.status_or_none() or {}).get("network", {}).get("refused") or 0
    proxy = "http://%s:%d" % (GW4, PROXY_PORT)
    f = fetch(ORG, "http://%s/open-refused" % ORG4, "-x", proxy)
    check(f.rc in (52, 56) and f.code == 0, "no open proxy: from the origin namespace (%s, outside access.allow) the proxy on %s closes the connection without a response: %r" % (ORG4, proxy, f))
    check(not origin.requests("/open-refused"), "the refused request never reached the origin")
    refused = wait_until("refused", lambda: (app.network().get("refused") or 0) > before, 5, pause=0.25)
    check(bool(refused), "status --json network.refused counts it: %s (before %s)" % (safe(lambda: app.network().get("refused")), before))
    f = fetch(ORG, "http://%s:%d/open-transparent" % (GW4, TRANSPARENT_PORT), "-H", "Host: origin.test")
    check(f.rc in (52, 56) and f.code == 0, "the transparent listener %s:%d refuses a direct connection from %s too: %r" % (GW4, TRANSPARENT_PORT, ORG4, f))
    # An admitted device dialling the transparent port itself (no redirect): closed, not proxied to the appliance.
    f = fetch(DEV, "http://%s:%d/direct-transparent" % (GW4, TRANSPARENT_PORT), "-H", "Host: origin.test")
    check(f.rc in (52, 56) and f.code == 0 and not origin.requests("/direct-transparent"),
          "a direct connection from the device to the transparent port %s:%d is closed unanswered: %r" % (GW4, TRANSPARENT_PORT, f))
    with open(app.log, errors="replace") as log:
        text = log.read()
    check("not redirected" in text and "cannot accept a connection" not in text,
          "the log says it was not redirected, and no accept failed")
    r = app.cli("allow", ORG4, "--ttl", "1h")
    check(r.returncode == 0, "busymate allow %s --ttl 1h (rc %d: %s)" % (ORG4, r.returncode, (r.stdout + r.stderr).strip()[:200]))
    listed = app.cli("allow")
    check(ORG4 in listed.stdout, "busymate allow lists the grant: %r" % listed.stdout.strip()[:300])
    tries = []
    ok = wait_until("the grant applies", lambda: tries.append(fetch(ORG, "http://%s/open-granted" % ORG4, "-x", proxy)) or tries[-1].body == b"origin /open-granted", 5, pause=0.25)
    check(bool(ok), "with the grant the same client's request is proxied: %r" % (tries[-1] if tries else None))
    r = app.cli("allow", "--remove", ORG4)
    check(r.returncode == 0 and ORG4 not in app.cli("allow").stdout, "busymate allow --remove %s (rc %d: %s)" % (ORG4, r.returncode, (r.stdout + r.stderr).strip()[:200]))
    tries = []
    ok = wait_until("refused again", lambda: tries.append(fetch(ORG, "http://%s/open-removed" % ORG4, "-x", proxy)) or (tries[-1].rc in (52, 56) and tries[-1].code == 0), 5, pause=0.25)
    check(bool(ok), "without the grant it is refused again: %r" % (tries[-1] if tries else None))


def check_grant_expiry(app, origin):
    proxy = "http://%s:%d" % (GW4, PROXY_PORT)
    granted_at = time.time()
    r = app.cli("allow", ORG4, "--ttl", "8s")
    check(r.returncode == 0, "busymate allow %s --ttl 8s (rc %d: %s)" % (ORG4, r.returncode, (r.stdout + r.stderr).strip()[:200]))
    ok = wait_until("the grant applies", lambda: fetch(ORG, "http://%s/grant-applies" % ORG4, "-x", proxy).body == b"origin /grant-applies", 5, pause=0.25)
    check(bool(ok), "with the 8 s grant the client's request is proxied")
    # One kept-alive connection, a request a second, well past the grant's end.
    r = ns(ORG, [sys.executable, os.path.abspath(__file__), "--keepalive-probe", GW4, str(PROXY_PORT), "http://%s/grant-keepalive" % ORG4, "16"], timeout=40)
    probe = safe_get(lambda: json.loads(r.stdout)) or {}
    answered = probe.get("answered") or []
    expired = granted_at + 8
    late = [round(t - granted_at, 1) for t in answered if t > expired + 1]
    ended = probe.get("ended")
    check(len(answered) >= 3 and not late and ended is not None and ended < expired + 2,
          "a kept-alive connection opened under the grant is closed when it expires (granted at 0 s, expires at 8 s): answered at %s s, closed at %s s (%s); answered after expiry: %s"
          % ([round(t - granted_at, 1) for t in answered], round(ended - granted_at, 1) if ended else None, probe.get("why") or r.stderr.strip()[-200:], late))
    f = fetch(ORG, "http://%s/grant-expired" % ORG4, "-x", proxy)
    check(f.rc in (52, 56) and f.code == 0 and not origin.requests("/grant-expired"), "a new connection after the expiry is refused: %r" % f)
    with open(app.log, errors="replace") as log:
        check("the access grant for %s ended" % ORG4 in log.read(), "the log says the grant's connection was closed")


def pac_answer(pac_text, url, host):
    """What a real PAC evaluator (pacparser, the engine browsers' PAC support grew from) makes of a PAC file."""
    import pacparser
    pacparser.init()
    try:
        pacparser.parse_pac_string(pac_text)
        return pacparser.find_proxy(url, host)
    finally:
        pacparser.cleanup()


def enrol_link(text):
    m = re.search(r"http://%s:%d/enrol/[A-Za-z0-9_-]{16,64}" % (re.escape(GW4), ONBOARDING_PORT), text)
    return m.group(0) if m else None


def log_text(app):
    with open(app.log, errors="replace") as log:
        return log.read()


def check_enrolment(app, origin):
    """One step for a device: the link `devices add` prints, opened on the device (the origin's
    namespace: outside access.allow, so only the link can let it in), admits it, names it, gives it
    a PAC for its own port and follows its readiness; the link is refused to a second address,
    once revoked, and once expired."""
    base = "http://%s:%d" % (GW4, ONBOARDING_PORT)
    r = app.cli("devices", "add", "tablet")
    ports = [int(p) for p in re.findall(r"\b(\d{4,5})\b", r.stdout) if int(p) in POOL]
    link = enrol_link(r.stdout)
    check(r.returncode == 0 and bool(ports) and link is not None,
          "busymate devices add tablet prints its port and an enrolment link on the onboarding listener: %r" % (r.stdout[:300] + r.stderr[:300]))
    qr = [l for l in r.stdout.splitlines() if len(l) >= 21 and set(l) <= set("\u2588\u2580\u2584 ")]
    check(len(qr) >= 11 and len(set(len(l) for l in qr)) == 1, "and a QR code as text (%d lines of blocks)" % len(qr))
    if not ports or link is None:
        return
    port = ports[0]
    proxy = "http://%s:%d" % (GW4, port)
    f = fetch(ORG, "http://%s/enrol-before" % ORG4, "-x", proxy)
    check(f.rc in (52, 56) and f.code == 0 and not origin.requests("/enrol-before"),
          "before its link is opened the device (%s, outside access.allow) is refused on its port %d: %r" % (ORG4, port, f))

    confirm = fetch(ORG, link)
    check(confirm.code == 200 and b"<form method=post" in confirm.body and b"<span id=device>tablet</span>" in confirm.body,
          "opened on the device, the link asks it to confirm (a link preview must not use it up): %d %r" % (confirm.code, confirm.body[:160]))
    f = fetch(ORG, "http://%s/enrol-opened" % ORG4, "-x", proxy)
    check(f.rc in (52, 56) and not origin.requests("/enrol-opened"), "opening it alone admits nothing: %r" % f)
    forged = fetch(ORG, link, "-d", "", "-H", "Origin: http://pages.example", "-H", "Sec-Fetch-Site: cross-site")
    check(forged.code == 403 and b"Not from this page" in forged.body, "a confirm posted from another site's page is refused: %d" % forged.code)
    page = fetch(ORG, link, "-d", "", "-L")
    check(page.code == 200 and header(page, "content-type").startswith("text/html") and b"<span id=device>tablet</span>" in page.body
          and b"/device/tablet/proxy.pac" in page.body and b"/ca.der" in page.body and b"Android" in page.body,
          "the device confirms: its own setup page (name, its PAC URL, the CA, platform steps): %d %r" % (page.code, page.body[:200]))
    pac = fetch(ORG, base + "/device/tablet/proxy.pac")
    answer = safe_get(lambda: pac_answer(pac.body.decode(), "https://origin.test/x", "origin.test"))
    check(pac.code == 200 and header(pac, "content-type").startswith("application/x-ns-proxy-autoconfig") and answer == "PROXY %s:%d; DIRECT" % (GW4, port),
          "its PAC, evaluated by pacparser, sends origin.test to its own port: %r" % answer)
    own = safe_get(lambda: pac_answer(pac.body.decode(), base + "/device/tablet", GW4))
    check(own == "DIRECT", "and the appliance's own pages (%s) directly, so its setup page still knows it: %r" % (GW4, own))
    other_pac = fetch(DEV, base + "/device/tablet/proxy.pac")
    check(other_pac.code == 404 and b"FindProxyForURL" not in other_pac.body, "another address is not given the device's PAC (names and ports stay private): %d" % other_pac.code)
    d = safe_get(lambda: app.json("devices", "show", "tablet")) or {}
    until = d.get("admitted_until") or ""
    check(str(d.get("enrolment", "")).startswith("enrolled from %s" % ORG4) and d.get("address") == ORG4 and d.get("pac_fetches", 0) >= 1
          and until > time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 86400 - 120)) and not d.get("ca_trusted_at"),
          "devices show tablet --json: enrolled from %s, admitted ~24 h, PAC fetched, not trusted yet: %s" % (ORG4, json.dumps(d)[:400]))
    f = fetch(ORG, base + "/ca.pem")
    ca_file = log_path("tablet-ca.pem")
    with open(ca_file, "wb") as out:
        out.write(f.body)
    d = wait_until("CA downloaded", lambda: (safe_get(lambda: app.json("devices", "show", "tablet")) or {}).get("ca_downloads"), 5, pause=0.25)
    check(bool(d), "after its download: CA downloaded")
    r = fetch(ORG, "https://origin.test/enrolled", "-x", proxy, "--cacert", ca_file)
    check(r.rc == 0 and r.body == b"origin /enrolled", "admitted by its link, its HTTPS through its port verifies with the CA it downloaded: %r" % r)
    row = app.find_row("/enrolled")
    check(row is not None and row.get("device") == "tablet", "the exchange is the device's: %s" % json.dumps(row)[:300])
    d = wait_until("trusted", lambda: (lambda x: x if x.get("ca_trusted_at") and x.get("online") else None)(safe_get(lambda: app.json("devices", "show", "tablet")) or {}), 5, pause=0.25)
    check(bool(d) and d.get("source") == "port", "readiness: CA trusted once its handshake completed, online, mode port: %s" % json.dumps(d)[:400])
    # The whitelist renewed while in use: a grant with less than 23 h left is extended by the tunnel when the device sends traffic.
    path = os.path.join(app.group, "settings.json")
    settings = json.load(open(path))
    for grant in settings.get("access", {}).get("grants", []):
        if grant.get("address") == ORG4:
            grant["until"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 22 * 3600))
    with open(path + ".tmp", "w") as f:
        json.dump(settings, f, indent=2)
    os.chmod(path + ".tmp", os.stat(path).st_mode & 0o777)
    os.replace(path + ".tmp", path)
    short_until = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 22 * 3600))
    wait_until("22 h left", lambda: str((safe_get(lambda: app.json("devices", "show", "tablet")) or {}).get("admitted_until", "")).startswith(short_until), 5, pause=0.25)
    time.sleep(1)
    fetch(ORG, "http://%s/enrol-renew" % ORG4, "-x", proxy)
    day = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 86400 - 120))
    renewed = wait_until("renewed", lambda: (lambda u: u if u > day else None)(str((safe_get(lambda: app.json("devices", "show", "tablet")) or {}).get("admitted_until", ""))), 10, pause=0.25)
    check(bool(renewed), "its grant, set to 22 h left, is renewed to 24 h by its next request (the tunnel writes it): %r" % renewed)
    check("renewed the admission of enrolled devices in use" in log_text(app), "and the log says so")
    mode = (app.network() or {}).get("mode")
    pill = wait_until("the pill counts it", lambda: next((l for l in reversed(app.statuses[-5:]) if re.search(r"(^|· )%s :\d+ .*· [1-9]\d* devices? · .*CA ok" % mode, l)), None), 5, pause=0.25)
    check(bool(pill), "systemd's STATUS= line carries the mode (%s) and the devices online: %r" % (mode, pill or app.statuses[-1:]))
    card = app.cli("devices", "show", "tablet").stdout
    check(all(("\u2713 " + step) in card for step in ("enrolled", "admitted until", "PAC fetched", "CA downloaded", "CA trusted", "traffic seen", "online")),
          "busymate devices show tablet: every step ticked: %r" % card)
    mine = fetch(ORG, base + "/device/tablet")
    ticked = re.findall(rb'<li class="ok" data-step="([^"]+)"', mine.body)
    check(mine.code == 200 and set(ticked) >= {b"Enrolled", b"Admitted", b"PAC fetched", b"CA downloaded", b"CA trusted", b"Traffic seen"}
          and b'http-equiv="refresh"' in mine.body, "its page follows its readiness, every step ticked now: %r" % ticked)
    other = fetch(DEV, base + "/device/tablet")
    check(other.code == 403 and b"<li" not in other.body, "another address is not shown the device's page: %d" % other.code)

    r = app.cli("devices", "add", "laptop")
    laptop = enrol_link(r.stdout)
    through = fetch(ORG, laptop or base + "/enrol/x", "-x", proxy)
    check(through.code == 403 and b"through its own proxy" in through.body,
          "a link opened through the proxy (the appliance's own address would be enrolled) is refused with why: %d %r" % (through.code, through.body[:160]))
    d = safe_get(lambda: app.json("devices", "show", "laptop")) or {}
    check(d.get("enrolment") == "link not opened yet", "and laptop's link is still unused: %s" % json.dumps(d)[:200])

    second = fetch(DEV, link, "-L")
    check(second.code == 403 and b"already used" in second.body, "the same link from a second address (%s) is refused with a page: %d %r" % (DEV4, second.code, second.body[:120]))
    again = fetch(ORG, link)
    check(again.code == 303, "the device itself may open it again: %d" % again.code)
    check(wait_until("the log", lambda: "refused tablet's enrolment link from another address" in log_text(app), 3),
          "the refusal is logged")

    r = app.cli("devices", "revoke", "tablet")
    check(r.returncode == 0 and ORG4 in r.stdout, "busymate devices revoke tablet: %r" % (r.stdout + r.stderr))
    gone = wait_until("its admission ends", lambda: (lambda f: f if f.rc in (52, 56) else None)(fetch(ORG, "http://%s/enrol-revoked" % ORG4, "-x", proxy)), 5, pause=0.25)
    check(bool(gone) and not origin.requests("/enrol-revoked"), "once revoked, the device is refused again")
    f = fetch(ORG, link)
    check(f.code == 410 and b"revoked" in f.body, "the revoked link is refused with a page: %d %r" % (f.code, f.body[:160]))

    r = app.cli("devices", "add", "kiosk", "--link-ttl", "2s")
    short = enrol_link(r.stdout)
    check(r.returncode == 0 and short is not None, "a device whose link lasts 2 s: %r" % r.stdout[:200])
    if short:
        time.sleep(2.5)
        f = fetch(ORG, short)
        check(f.code == 410 and b"expired" in f.body, "the expired link is refused with a page: %d %r" % (f.code, f.body[:160]))
        d = safe_get(lambda: app.json("devices", "show", "kiosk")) or {}
        check(d.get("enrolment") == "link expired" and not d.get("admitted_until"), "and admits nothing: %s" % json.dumps(d)[:300])
    f = fetch(ORG, base + "/enrol/" + "A" * 22)
    check(f.code == 404, "a link nobody issued: 404 (%d)" % f.code)
    text = log_text(app)
    check("it expired" in text and "it was revoked" in text, "expiry and revocation refusals are logged")
    for name in ("tablet", "kiosk", "laptop"):
        app.cli("devices", "remove", name)


def check_second_instance(app, origin):
    """Another appliance in the same network namespace (its own group directory) never touches this one's table."""
    table = table_name()
    before = normalized(nft_table())
    check(bool(before), "this appliance's table inet %s is installed" % table)
    group = log_path("group-second")
    os.makedirs(group)
    with open(os.path.join(group, "settings.json"), "w") as f:
        json.dump({"mode": "proxy", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 1}}, f)
    env = dict(os.environ, BUSYMATE_LOG="stderr")
    env.pop("NOTIFY_SOCKET", None)
    second = subprocess.Popen(["ip", "netns", "exec", APP, os.path.join(ARGS.bin, "busymate-app"), "--group", group], stdout=subprocess.DEVNULL,
                              stderr=open(log_path("supervisor-second.log"), "ab"), env=env)
    second_status = lambda: json.loads(ns(APP, [os.path.join(ARGS.bin, "busymate"), "status", "--json", "--group", group]).stdout)
    try:
        ready = wait_until("the second appliance is ready", lambda: (second_status().get("tunnel") or {}).get("state") == "ready", 30, pause=0.2)
        check(bool(ready), "a second appliance (proxy mode, group %s) starts in the same namespace" % group)
        other = safe_get(lambda: second_status()["network"].get("table"))
        check(other is None or other != table, "its table name differs from this one's: %s, %s" % (other, table))
        time.sleep(1)
        listing = nft_table()
        check(listing is not None and normalized(listing) == before,
              "its start-up clean-up left this appliance's table inet %s alone (%s)" % (table, "present, unchanged" if listing else "GONE"))
        f = dev_fetch("http://origin.test/second-instance", "-4")
        row = app.find_row("/second-instance") if f.rc == 0 else None
        check(f.body == b"origin /second-instance" and row is not None and row.get("front_end") == "transparent",
              "the device is still captured transparently: %r, row %s" % (f, json.dumps(row)[:200]))
    finally:
        second.terminate()
        try:
            second.wait(20)
        except subprocess.TimeoutExpired:
            second.kill()
    listing = nft_table()
    check(listing is not None and normalized(listing) == before, "its stop left this appliance's table alone too (%s)" % ("present" if listing else "GONE"))
    # Someone else removes our table (nft flush ruleset, a firewall reload): status says so, and it is put back.
    r = ns(APP, ["nft", "delete", "table", "inet", table])
    check(r.returncode == 0, "nft delete table inet %s from outside (rc %d: %s)" % (table, r.returncode, r.stderr.strip()[:200]))
    said = wait_until("status sees the table is gone", lambda: app.network().get("rules") != "installed" and app.network().get("rules"), 3, pause=0.05)
    back = wait_until("the table is back", lambda: normalized(nft_table()) == before and app.network().get("rules") == "installed", 15, pause=0.2)
    check(bool(back), "the supervisor notices and puts its table back, and status says installed again (status said %r meanwhile)" % said)
    with open(app.log, errors="replace") as log:
        check("removed from outside" in log.read(), "the log says the rules were removed from outside")


def check_ipv6(app, origin):
    f = dev_fetch("http://origin.test/gw-v6", "-6")
    check(f.rc == 0 and f.body == b"origin /gw-v6", "IPv6 gateway: the device's curl -6 http://origin.test/gw-v6 (AAAA) is answered: %r" % f)
    row = app.find_row("/gw-v6")
    detail = app.show(row["id"]) if row else {}
    check(row is not None and row.get("front_end") == "transparent" and addr_is(detail.get("client_address"), DEV6),
          "captured: front_end transparent, client_address %s: %s, %s" % (DEV6, (row or {}).get("front_end"), detail.get("client_address")))
    f = fetch(DEV, "http://[%s]/gw-v6-literal" % ORG6)
    check(f.rc == 0 and f.body == b"origin /gw-v6-literal", "curl http://[%s]/gw-v6-literal is answered: %r" % (ORG6, f))
    row = app.find_row("/gw-v6-literal")
    detail = app.show(row["id"]) if row else {}
    check(row is not None and row.get("front_end") == "transparent" and addr_is(detail.get("client_address"), DEV6),
          "captured: front_end transparent, client_address %s: %s, %s, url %s" % (DEV6, (row or {}).get("front_end"), detail.get("client_address"), (row or {}).get("url")))
    f = dev_fetch("https://origin.test/gw-v6-tls", "-6", "--cacert", os.path.join(app.group, "ca.pem"))
    check(f.rc == 0 and f.body == b"origin /gw-v6-tls", "IPv6 HTTPS verifies with the group's CA: %r" % f)
    row = app.find_row("/gw-v6-tls")
    detail = app.show(row["id"]) if row else {}
    check(row is not None and row.get("tls") == "mitm" and row.get("front_end") == "transparent" and addr_is(detail.get("client_address"), DEV6)
          and (detail.get("tls_handshake") or {}).get("sni") == "origin.test",
          "captured: tls mitm, sni origin.test, client_address %s: %s" % (DEV6, json.dumps({k: detail.get(k) for k in ("tls", "client_address", "tls_handshake")})[:300]))


def check_lifecycle(app, origin):
    r = app.cli("mode", "proxy")
    gone = wait_until("the table is removed", lambda: nft_table() is None, 10, pause=0.2)
    check(r.returncode == 0 and bool(gone), "busymate mode proxy removes its table (rc %d)" % r.returncode)
    r = app.cli("mode", "transparent")
    listing = wait_until("the table is back", nft_table, 10, pause=0.2)
    check(r.returncode == 0 and bool(listing), "busymate mode transparent installs it again (rc %d)" % r.returncode)
    before = normalized(listing)

    installed = lambda: app.network().get("rules") == "installed"
    app.kill9()
    app.start()
    wait_until("the new supervisor has applied the rules", installed, 10, pause=0.2)
    listing = wait_until("the table", nft_table, 10, pause=0.2)
    count = nft_table_count()
    check(count == 1 and normalized(listing) == before,
          "after kill -9 of the supervisor and a new start: one table of its own, the same rules (%d tables; added %s, lost %s)"
          % (count, [l for l in normalized(listing) if l not in before][:3], [l for l in before if l not in normalized(listing)][:3]))

    tunnel = (app.status().get("tunnel") or {}).get("pid")
    os.kill(int(tunnel), signal.SIGKILL)
    seen_absent = wait_until("the table while the tunnel is down", lambda: nft_table() is None, 2, pause=0.05)
    back = wait_until("a new tunnel", lambda: (app.status().get("tunnel") or {}).get("state") == "ready" and (app.status().get("tunnel") or {}).get("pid") not in (None, tunnel), 20, pause=0.2)
    wait_until("the rules are installed again", installed, 10, pause=0.2)
    listing = wait_until("the table", nft_table, 10, pause=0.2)
    count = nft_table_count()
    check(bool(back) and count == 1 and normalized(listing) == before,
          "after kill -9 of the tunnel (pid %s; the table was %s while it was down) the new tunnel is ready with one table and the same rules (%d tables)"
          % (tunnel, "removed" if seen_absent else "kept", count))
    f = dev_fetch("http://origin.test/after-tunnel-kill", "-4")
    row = app.find_row("/after-tunnel-kill") if f.rc == 0 else None
    check(f.body == b"origin /after-tunnel-kill" and row is not None and row.get("front_end") == "transparent", "gateway capture works again: %r, row %s" % (f, json.dumps(row)[:200]))

    result = app.stop()
    check(result == 0 or result == -signal.SIGTERM, "SIGTERM stops the supervisor (exit %s)" % result)
    check(nft_table() is None and not nft_busymate_tables(), "no busymate table is left after it stopped: %s" % nft_busymate_tables())

    def busymate_left():
        names = []
        for pid in netns_pids(APP):
            try:
                names.append(open("/proc/%d/comm" % pid).read().strip())
            except OSError:
                pass
        return [n for n in names if n.startswith("busymate")]
    left = wait_until("the children stop", lambda: not busymate_left(), 10, pause=0.2)
    check(bool(left), "no busymate process is left in the appliance namespace: %s" % busymate_left())


def full_run(origin, certs):
    if run(["id", "busymate"]).returncode != 0:
        print("creating system user and group busymate (as scripts/install-deps.sh does)", flush=True)
        if run(["getent", "group", "busymate"]).returncode != 0:
            must_run(["groupadd", "--system", "busymate"])
        must_run(["useradd", "--system", "--gid", "busymate", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "busymate"])
    app = Appliance(certs)
    STATE["app"] = app
    app.start()
    check(True, "the appliance is ready in the appliance namespace")
    sections = [
        ("1. mode transparent installs the table", check_mode),
        ("2. gateway: plain HTTP", check_gateway_plain),
        ("3. gateway: HTTPS intercepted", check_gateway_tls),
        ("4. gateway: HTTPS passed through", lambda a, o: check_passthrough(a, o, certs)),
        ("5. output hook: the appliance's own traffic", check_output),
        ("6. DNS forwarder", check_dns),
        ("7. QUIC rejected", check_quic),
        ("9. onboarding listener", check_onboarding),
        ("10. device port", check_device_port),
        ("11. no open proxy", check_open_proxy),
        ("12. IPv6", check_ipv6),
        ("13. an access grant's expiry closes its connections", check_grant_expiry),
        ("15. one-step enrolment", check_enrolment),
        ("14. a second appliance leaves this one's table alone", check_second_instance),
        # Last: it kills and stops the appliance.
        ("8. the table's lifecycle", check_lifecycle),
    ]
    for name, body in sections:
        try:
            app.ensure()
        except Exception as error:
            check(False, "%s: the appliance could not be restarted: %s" % (name, error))
            continue
        section(name, body, app, origin)


def main():
    global ARGS, BASE
    parser = argparse.ArgumentParser(description="Busymate devices on the network, end to end, in network namespaces.")
    parser.add_argument("--bin", help="the directory with busymate-app, busymate-tunnel, busymate-web and busymate")
    parser.add_argument("--topology-only", action="store_true", help="only the namespaces, the origin and a plain router: no Busymate")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, group) even when all passed")
    parser.add_argument("--serve-origin", metavar="CONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--dns-query", nargs=3, metavar=("SERVER", "NAME", "TYPE"), help=argparse.SUPPRESS)
    parser.add_argument("--tcp", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keepalive-probe", nargs=4, metavar=("HOST", "PORT", "URL", "SECONDS"), help=argparse.SUPPRESS)
    ARGS = parser.parse_args()
    if ARGS.keepalive_probe:
        host, port, url, seconds = ARGS.keepalive_probe
        print(json.dumps(keepalive_probe(host, int(port), url, float(seconds))))
        return 0
    if ARGS.serve_origin:
        serve_origin(ARGS.serve_origin)
        return 0
    if ARGS.dns_query:
        status, answers = dns_query_stub(ARGS.dns_query[0], ARGS.dns_query[1], ARGS.dns_query[2], ARGS.tcp)
        print(json.dumps({"status": status, "answers": answers}))
        return 0
    if os.geteuid() != 0:
        print("*" * 72 + "\nSKIPPED: the devices test needs root (network namespaces, nftables)\n" + "*" * 72, flush=True)
        return 0
    missing = [tool for tool in ("ip", "nft", "curl", "openssl") if not shutil.which(tool)]
    if missing:
        print("FAILED: the devices test needs %s (scripts/install-deps.sh --test installs them; Debian: apt-get install iproute2 nftables curl openssl)" % ", ".join(missing), flush=True)
        return 1
    if not ARGS.topology_only:
        if not ARGS.bin:
            parser.error("--bin DIR is required (or --topology-only)")
        absent = [b for b in ("busymate-app", "busymate-tunnel", "busymate-web", "busymate") if not os.access(os.path.join(ARGS.bin, b), os.X_OK)]
        if absent:
            print("FAILED: not in %s: %s" % (ARGS.bin, ", ".join(absent)), flush=True)
            return 1
        ARGS.bin = os.path.abspath(ARGS.bin)
    if not shutil.which("dig"):
        print("note: dig is not installed; DNS queries use this script's own stub client", flush=True)

    def interrupted(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    BASE = tempfile.mkdtemp(prefix="bmdev-", dir="/tmp")
    os.chmod(BASE, 0o755)
    remove_leftovers()
    print("devices test: namespaces %s, logs in %s" % (", ".join(NAMESPACES), BASE), flush=True)
    origin = None
    try:
        certs = make_certs()
        create_topology()
        origin = Origin(certs)
        if ARGS.topology_only:
            topology_checks(origin, certs)
        else:
            full_run(origin, certs)
    except BaseException as error:
        check(False, "the run stopped: %s: %s" % (type(error).__name__, error))
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)  # the cleanup runs to its end
        app = STATE.get("app")
        if app is not None:
            try:
                app.stop()
            except Exception as error:
                print("stopping the appliance: %s" % error, flush=True)
        if origin is not None:
            origin.stop()
        destroy_topology()
        if FAILED and app is not None and os.path.exists(app.log):
            print("--- the last 40 lines of the supervisor log (%s):" % app.log)
            print("".join(open(app.log, errors="replace").readlines()[-40:]), end="")
            print("---")
        if FAILED or ARGS.keep:
            print("logs, group and commands.log kept in " + BASE)
        else:
            shutil.rmtree(BASE, ignore_errors=True)
    print("devices%s: %d passed, %d failed" % (" (topology only)" if ARGS.topology_only else "", len(PASSED), len(FAILED)))
    for what in FAILED:
        print("  FAILED: " + what)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
