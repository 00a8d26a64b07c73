#!/usr/bin/env python3
"""The fault suite: the real appliance under a steady, tagged client load,
while its parts are killed, its files broken and its disk filled. Every
check that must hold fails the run; the figures go to a Markdown report.

usage: run.py --bin DIR [--report FILE] [--kills N] [--restarts N]
Run as root (it kills the tunnel, which runs as user busymate, and mounts
a small tmpfs). Traffic stays on loopback.
"""
import argparse, http.client, json, os, random, shutil, socket, sqlite3, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
FAILURES = []
REPORT = []


def must(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what, flush=True)
    return condition


def say(line=""):
    REPORT.append(line)
    print(line, flush=True)


# --- the origin -----------------------------------------------------------

class Origin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = ("ok " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a proxy killed mid-request resets its connections: expected here


def start_origin():
    server = QuietServer(("127.0.0.1", 0), Origin)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


# --- the appliance --------------------------------------------------------

class Appliance:
    def __init__(self, base, settings=None):
        self.base = base
        self.group = os.path.join(base, "group")
        os.makedirs(self.group, exist_ok=True)
        self.log = os.path.join(base, "supervisor.log")
        self.process = None
        with open(os.path.join(self.group, "settings.json"), "w") as f:
            f.write(settings or default_settings())

    def start(self, wait=True):
        log = open(self.log, "ab")
        env = dict(os.environ, BUSYMATE_LOG="stderr")
        env.pop("NOTIFY_SOCKET", None)
        self.process = subprocess.Popen([os.path.join(ARGS.bin, "busymate-app"), "--group", self.group, "--restart-backoff-max", "0.5"],
                                        stdout=subprocess.DEVNULL, stderr=log, env=env)
        if wait:
            wait_until("the tunnel is ready", lambda: self.state() == "ready", 20)

    def cli(self, *args, check=False):
        r = subprocess.run([os.path.join(ARGS.bin, "busymate")] + list(args) + ["--group", self.group], capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("busymate %s: %s" % (" ".join(args), r.stderr))
        return r

    def status(self):
        r = self.cli("status", "--json")
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}

    def state(self):
        return (self.status().get("tunnel") or {}).get("state")

    def tunnel_pid(self):
        return (self.status().get("tunnel") or {}).get("pid")

    def port(self):
        for listener in self.status().get("listeners", []):
            if listener.get("bound"):
                return int(listener["bound"].rsplit(":", 1)[1])
        raise RuntimeError("no bound listener")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        for pid in tunnel_pids(self.group) + tunnel_pids(self.group, b"busymate-web"):
            os.kill(pid, 9)

    def store_ids(self):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.group, "capture.sqlite"), uri=True, timeout=10)
        try:
            return {row[0].rsplit("/", 1)[-1] for row in db.execute("SELECT url FROM exchanges WHERE url LIKE '%/f/%'")}
        finally:
            db.close()

    def integrity(self):
        db = sqlite3.connect(os.path.join(self.group, "capture.sqlite"), timeout=10)
        try:
            return db.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            db.close()


def default_settings(extra=""):
    return '{"log_level": "info", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2}%s}\n' % extra


def tunnel_pids(group, name=b"busymate-tunnel"):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/stat" % entry) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd and cmd[0].endswith(name) and group.encode() in cmd and state != "Z":
            pids.append(int(entry))
    return pids


def wait_until(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except Exception:
            pass
        time.sleep(0.05)
    must(False, "timed out after %ss waiting until %s" % (timeout, what))
    return False


# --- the load -------------------------------------------------------------

class Load:
    """Keep-alive clients, each request tagged with an id in its path. One
    more client speaks HTTP/2 (h2c with prior knowledge to the proxy port),
    a few streams at a time on one connection, so HTTP/2 traffic is in the
    load the faults hit."""

    def __init__(self, proxy_port, origin_port, clients=4, pause=0.02, idle_clients=0, h2_clients=1):
        self.proxy_port, self.origin_port = proxy_port, origin_port
        self.results = []  # (id, wall time at completion, ok, error, reused, wall time sent)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(pause, False), daemon=True) for _ in range(clients)]
        self.threads += [threading.Thread(target=self.run, args=(None, True), daemon=True) for _ in range(idle_clients)]
        self.threads += [threading.Thread(target=self.run_h2, args=(pause,), daemon=True) for _ in range(h2_clients)]
        for t in self.threads:
            t.start()

    def run(self, pause, idle):
        conn, uses = None, 0
        while not self.stopping.is_set():
            if conn is None:
                conn, uses = http.client.HTTPConnection("127.0.0.1", self.proxy_port, timeout=10), 0
            rid = "%016x" % random.getrandbits(64)
            reused = uses > 0
            sent = time.time()
            try:
                conn.request("GET", "http://127.0.0.1:%d/f/%s" % (self.origin_port, rid))
                response = conn.getresponse()
                body = response.read()
                ok = response.status == 200 and body == ("ok /f/" + rid).encode()
                error = None if ok else "status %d" % response.status
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (ConnectionRefusedError,) as e:
                ok, error = False, "refused"
                conn = None
            except (OSError, http.client.HTTPException) as e:
                ok, error = False, type(e).__name__
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
            uses += 1
            with self.lock:
                self.results.append((rid, time.time(), ok, error, reused, sent))
            # An idle keep-alive client waits a while between requests.
            time.sleep(random.uniform(0.2, 1.2) if idle else pause)

    def run_h2(self, pause, streams=3):
        import h2.connection, h2.config, h2.events
        while not self.stopping.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.proxy_port), timeout=10)
            except OSError:
                time.sleep(0.05)
                continue
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            conn.initiate_connection()
            uses = 0
            try:
                sock.sendall(conn.data_to_send())
                goaway, open_streams = False, {}
                while not self.stopping.is_set():
                    open_streams = {}
                    for _ in range(streams):
                        sid = conn.get_next_available_stream_id()
                        rid = "%016x" % random.getrandbits(64)
                        conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1:%d" % self.origin_port),
                                                (":path", "/f/" + rid)], end_stream=True)
                        open_streams[sid] = [rid, b"", None, time.time(), uses > 0]
                    sock.sendall(conn.data_to_send())
                    while open_streams:
                        data = sock.recv(65536)
                        if not data:
                            raise OSError("closed")
                        for event in conn.receive_data(data):
                            if isinstance(event, h2.events.ResponseReceived) and event.stream_id in open_streams:
                                open_streams[event.stream_id][2] = dict(event.headers).get(b":status")
                            elif isinstance(event, h2.events.DataReceived) and event.stream_id in open_streams:
                                open_streams[event.stream_id][1] += event.data
                                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and event.stream_id in open_streams:
                                rid, body, status, sent, reused = open_streams.pop(event.stream_id)
                                ok = status == b"200" and body == ("ok /f/" + rid).encode()
                                with self.lock:
                                    self.results.append((rid, time.time(), ok, None if ok else "h2 status %s" % status, reused, sent))
                            elif isinstance(event, h2.events.ConnectionTerminated):
                                # A draining tunnel's GOAWAY. Python's h2 takes no frame after
                                # one, though the streams under way are answered (curl and
                                # browsers read them): they are left out, as not answered.
                                goaway = True
                                open_streams.clear()
                                break
                        sock.sendall(conn.data_to_send())
                    uses += 1
                    if goaway:
                        break
                    time.sleep(pause)
            except (OSError, Exception) as e:
                # Streams in flight when the connection died failed (as HTTP/1 requests in flight do).
                for rid, body, status, sent, reused in open_streams.values():
                    with self.lock:
                        self.results.append((rid, time.time(), False, "h2 " + type(e).__name__, reused, sent))
            finally:
                sock.close()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(15)

    def since(self, t):
        with self.lock:
            return [r for r in self.results if r[1] >= t]

    def first_success_after(self, t):
        with self.lock:
            # Sent after t: one the old tunnel answered just before t may be read after it.
            times = [r[1] for r in self.results if r[5] > t and r[2]]
        return min(times) if times else None


def scratch(name):
    base = tempfile.mkdtemp(prefix="bmf-%s-" % name)
    os.chmod(base, 0o755)
    return base


# --- the faults -----------------------------------------------------------

def tunnel_kills(origin_port):
    say("## `kill -9` of the tunnel, %d times under load" % ARGS.kills)
    a = Appliance(scratch("kill"))
    a.start()
    load = Load(a.port(), origin_port)
    time.sleep(1)
    kills, backs = [], []
    for i in range(ARGS.kills):
        pid = a.tunnel_pid()
        t = time.time()
        os.kill(pid, 9)
        kills.append(t)
        if wait_until("a request succeeds after kill %d" % (i + 1), lambda: load.first_success_after(t) is not None, 15):
            backs.append(load.first_success_after(t) - t)
        time.sleep(0.5)
    time.sleep(1)
    load.stop()
    time.sleep(1.5)
    stored = a.store_ids()
    results = load.results
    ok = [r for r in results if r[2]]
    # A request completed more than 100 ms before the next kill (or after the last) must be stored.
    # One sent before a kill and read after it was answered by the killed tunnel
    # just before the kill (the client read it late), so it is not due either.
    due = [r for r in ok if not any(0 <= k - r[1] <= 0.1 or r[5] <= k <= r[1] for k in kills)]
    missing = [r for r in due if r[0] not in stored]
    integrity = a.integrity()
    say("- requests: %d, answered 200: %d, failed: %d (their connections died with the tunnel)" % (len(results), len(ok), len(results) - len(ok)))
    say("- time back after each kill (first 200 after it): median %.2f s, max %.2f s (restart backoff capped at 0.5 s for the suite): %s"
        % (sorted(backs)[len(backs) // 2] if backs else -1, max(backs) if backs else -1, ", ".join("%.2f" % b for b in backs)))
    say("- exchanges completed more than 100 ms before a kill and missing from the store: **%d** of %d" % (len(missing), len(due)))
    for r in missing[:10]:
        before = [r[1] - k for k in kills if k <= r[1]]
        after = [k - r[1] for k in kills if k > r[1]]
        say("  - missing `%s`: completed %.3f s after the previous kill, %s before the next"
            % (r[0], min(before) if before else -1, "%.3f s" % min(after) if after else "(none)"))
    say("- `PRAGMA integrity_check`: %s" % integrity)
    must(len(missing) == 0, "%d exchanges completed >100 ms before a kill are missing" % len(missing))
    must(integrity == "ok", "integrity_check: %s" % integrity)
    must(len(backs) == ARGS.kills, "the tunnel came back after every kill")
    a.stop()
    return a


def supervisor_kill(origin_port):
    say("")
    say("## `kill -9` of the supervisor under load")
    a = Appliance(scratch("sup"))
    a.start()
    tunnel = a.tunnel_pid()
    load = Load(a.port(), origin_port)
    time.sleep(1)
    t = time.time()
    a.process.kill()
    a.process.wait()
    time.sleep(0.5)
    a.start(wait=False)
    adopted = wait_until("the new supervisor adopts the tunnel",
                         lambda: (a.status().get("tunnel") or {}).get("adopted") is True and a.tunnel_pid() == tunnel, 10)
    time.sleep(1)
    load.stop()
    during = load.since(t - 1)
    failed = [r for r in during if not r[2]]
    say("- requests from 1 s before the kill to 1 s after the adoption: %d, failed: **%d**" % (len(during), len(failed)))
    say("- the new supervisor adopted the running tunnel (same pid %d): %s" % (tunnel, "yes" if adopted else "**no**"))
    must(not failed, "%d requests failed across a supervisor kill" % len(failed))
    a.stop()


def clean_stop(origin_port):
    say("")
    say("## A clean stop leaves the whole capture in `capture.sqlite`")
    a = Appliance(scratch("stop"))
    a.start()
    load = Load(a.port(), origin_port)
    time.sleep(2)
    load.stop()
    answered = {r[0] for r in load.results if r[2]}
    wait_until("every answered request is stored", lambda: answered <= a.store_ids(), 10)
    a.process.terminate()
    a.process.wait(30)
    wal = os.path.join(a.group, "capture.sqlite-wal")
    wal_size = os.path.getsize(wal) if os.path.exists(wal) else 0
    # What a user sharing the capture copies: the one file.
    copy = os.path.join(a.base, "shared-copy.sqlite")
    shutil.copyfile(os.path.join(a.group, "capture.sqlite"), copy)
    db = sqlite3.connect(copy, timeout=10)
    try:
        copied = {row[0].rsplit("/", 1)[-1] for row in db.execute("SELECT url FROM exchanges WHERE url LIKE '%/f/%'")}
    except sqlite3.Error as e:
        # Without a checkpoint even the schema can still be in the WAL.
        say("- the copy cannot be read: %s" % e)
        copied = set()
    finally:
        db.close()
    say("- %d requests answered, then SIGTERM to the supervisor; the WAL left: %d bytes" % (len(answered), wal_size))
    say("- `capture.sqlite` copied alone holds %d of them" % len(answered & copied))
    must(wal_size == 0, "a clean stop left %d bytes of capture in capture.sqlite-wal" % wal_size)
    must(answered <= copied, "capture.sqlite alone lacks %d of %d stored exchanges" % (len(answered - copied), len(answered)))
    a.stop()


def tunnel_restarts(origin_port):
    say("")
    say("## `busymate tunnel restart`, %d times under load" % ARGS.restarts)
    a = Appliance(scratch("restart"))
    a.start()
    load = Load(a.port(), origin_port, clients=4, idle_clients=6)
    time.sleep(1)
    start = time.time()
    for i in range(ARGS.restarts):
        old = a.tunnel_pid()
        r = a.cli("tunnel", "restart")
        must(r.returncode == 0, "tunnel restart %d: %s" % (i + 1, r.stderr.strip()))
        wait_until("restart %d takes over" % (i + 1), lambda: a.tunnel_pid() not in (None, old) and a.state() == "ready", 10)
        time.sleep(0.6)
    time.sleep(2.5)
    load.stop()
    results = load.since(start)
    refused = [r for r in results if r[3] == "refused"]
    failed = [r for r in results if not r[2]]
    failed_idle = [r for r in failed if r[4]]
    say("- requests: %d; refused connections: **%d**; failed: %d, of which on a reused (idle keep-alive) connection: %d"
        % (len(results), len(refused), len(failed), len(failed_idle)))
    kinds = {}
    for r in failed:
        kinds[r[3]] = kinds.get(r[3], 0) + 1
    say("- the clients are 4 busy keep-alive connections and 6 that idle 0.2–1.2 s between requests, as a browser's do; failures by kind: %s"
        % (", ".join("%s %d" % kv for kv in sorted(kinds.items())) or "none"))
    must(not refused, "%d connections refused during tunnel restarts" % len(refused))
    a.stop()
    return len(failed_idle)


BROKEN_SETTINGS = [
    ("a syntax error", b'{"mode": "proxy",, }'),
    ("a wrong type", b'{"proxy": {"listen": "127.0.0.1:9090"}}'),
    ("an unknown mode", b'{"mode": "teleport"}'),
    ("a listen address that is not one", b'{"proxy": {"listen": ["localhost:9090"]}}'),
    ("an empty listen list", b'{"proxy": {"listen": []}}'),
    ("a negative drain", b'{"tunnel": {"drain_seconds": -1}}'),
    ("an empty file", b''),
    ("binary garbage", bytes(range(256)) * 4),
    ("5 MiB of padding", b'{"pad": "' + b"x" * (5 << 20) + b'"}'),
    ("a JSON array", b'[1, 2, 3]'),
]


def broken_settings(origin_port):
    say("")
    say("## `settings.json` broken ten ways, and made a directory, unreadable, a symlink")
    a = Appliance(scratch("settings"))
    a.start()
    port, tunnel = a.port(), a.tunnel_pid()
    path = os.path.join(a.group, "settings.json")
    with open(path, "rb") as f:
        good = f.read()
    rows = []

    def check(name, tunnel_only=False):
        seen = {}

        def errors():
            s = a.status()
            seen["sup"] = (s.get("settings") or {}).get("error")
            seen["tun"] = (s.get("tunnel") or {}).get("settings_error")
            if tunnel_only:
                seen["sup"] = "tunnel: %s (the supervisor, root, reads it)" % seen["tun"]
            return (seen["sup"] or tunnel_only) and seen["tun"]
        reported = wait_until("both processes report %s" % name, errors, 5)
        served = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", "http://127.0.0.1:%d" % port,
                                 "http://127.0.0.1:%d/f/settings" % origin_port], capture_output=True, text=True).stdout == "200"
        same = a.tunnel_pid() == tunnel
        rows.append("| %s | %s | %s | %s |" % (name, (seen.get("sup") or "—")[:160].replace("|", "/"), "yes" if served else "**no**", "yes" if same else "**no**"))
        must(reported and served and same, "settings %s: reported %s, served %s, same tunnel %s" % (name, reported, served, same))

    for name, content in BROKEN_SETTINGS:
        with open(path + ".tmp", "wb") as f:
            f.write(content)
        os.chmod(path + ".tmp", 0o664)
        os.rename(path + ".tmp", path)
        check(name)
    # A save that lands as mode 000 (an editor with a strange umask).
    with open(path + ".tmp", "wb") as f:
        f.write(good)
    os.chmod(path + ".tmp", 0o000)
    os.rename(path + ".tmp", path)
    check("mode 000", tunnel_only=True)
    os.chmod(path, 0o664)
    wait_until("the readable settings are back", lambda: not (a.status().get("tunnel") or {}).get("settings_error"), 5)
    os.unlink(path)
    os.mkdir(path)
    check("a directory")
    os.rmdir(path)
    with open(path, "wb") as f:
        f.write(good)
    os.rename(path, path + ".real")
    os.symlink(path + ".real", path)
    check("a symlink")
    os.unlink(path)
    os.rename(path + ".real", path)
    wait_until("the good settings are back", lambda: not (a.status().get("settings") or {}).get("error"), 5)
    say("| how | what `busymate status` says (`settings.error`) | still serving | same tunnel |")
    say("|---|---|---|---|")
    for row in rows:
        say(row)
    a.stop()


def disk_full(origin_port):
    say("")
    say("## A full disk (the group directory on a 4 MiB tmpfs)")
    base = scratch("full")
    group = os.path.join(base, "group")
    os.makedirs(group)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "busymate-faults", group]).returncode != 0:
        must(False, "cannot mount a tmpfs")
        return
    try:
        a = Appliance(base)
        a.start()
        port = a.port()
        subprocess.run(["dd", "if=/dev/zero", "of=%s" % os.path.join(group, "filler"), "bs=64k", "count=1000"], capture_output=True)
        load = Load(port, origin_port, clients=2)
        wait_until("status says the disk is full", lambda: "full" in ((a.status().get("tunnel") or {}).get("store") or ""), 20)
        store = (a.status().get("tunnel") or {}).get("store")
        time.sleep(2)
        load.stop()
        answered = [r for r in load.results if r[2]]
        os.unlink(os.path.join(group, "filler"))
        wait_until("status is ok again", lambda: (a.status().get("tunnel") or {}).get("store") == "ok", 15)
        time.sleep(1)
        stored = a.store_ids()
        missing = [r for r in answered if r[0] not in stored]
        say("- while full, `busymate status` said: `%s`" % store)
        say("- requests answered while the disk was full: %d (none held back); missing from the store once there was room: **%d**"
            % (len(answered), len(missing)))
        must(not missing, "%d exchanges lost to a full disk" % len(missing))
        a.stop()
    finally:
        subprocess.run(["umount", "-l", group])


def corrupt_store(origin_port):
    say("")
    say("## A corrupt store")
    a = Appliance(scratch("corrupt"))
    a.start()
    port = a.port()
    a.stop()
    path = os.path.join(a.group, "capture.sqlite")
    with open(path, "r+b") as f:
        f.write(os.urandom(64 << 10))
    # A WAL left behind would still hold a good page 1.
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    listed = a.cli("list")
    say("- `busymate list` on it: `%s`" % listed.stderr.strip()[:160])
    must(listed.returncode != 0 and "corrupt" in listed.stderr, "busymate list on a corrupt store says so")
    a.start()
    aside = [n for n in os.listdir(a.group) if n.startswith("corrupt-")]
    load = Load(a.port(), origin_port, clients=1)
    time.sleep(1)
    load.stop()
    time.sleep(0.5)
    stored = a.store_ids()
    ok = [r for r in load.results if r[2]]
    say("- at the next start: moved aside to `%s` (kept), a new store started; %d of %d new exchanges stored"
        % (aside[0] if aside else "nothing", len([r for r in ok if r[0] in stored]), len(ok)))
    must(len(aside) == 1, "the corrupt store is moved aside")
    must(all(r[0] in stored for r in ok), "the new store takes the new exchanges")
    a.stop()


def locks(origin_port):
    say("")
    say("## A reader in a long read transaction, a writer holding the lock")
    a = Appliance(scratch("locks"))
    a.start()
    load = Load(a.port(), origin_port, clients=2)
    time.sleep(0.5)
    db = sqlite3.connect(os.path.join(a.group, "capture.sqlite"), timeout=10, isolation_level=None)
    db.execute("BEGIN")
    db.execute("SELECT count(*) FROM exchanges").fetchone()
    time.sleep(3)
    listed = a.cli("list", "--limit", "1")
    db.execute("COMMIT")
    writer = sqlite3.connect(os.path.join(a.group, "capture.sqlite"), timeout=10, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    time.sleep(3)
    writer.execute("COMMIT")
    time.sleep(1.5)
    load.stop()
    time.sleep(1.5)
    stored = a.store_ids()
    ok = [r for r in load.results if r[2]]
    failed = [r for r in load.results if not r[2]]
    missing = [r for r in ok if r[0] not in stored]
    say("- 3 s of an open read transaction, then 3 s of `BEGIN IMMEDIATE` from another process: %d requests, failed **%d**, missing from the store **%d**; `busymate list` during the read: exit %d"
        % (len(load.results), len(failed), len(missing), listed.returncode))
    must(not failed and not missing and listed.returncode == 0, "locks: failed %d, missing %d, list %d" % (len(failed), len(missing), listed.returncode))
    a.stop()


def ca_files(origin_port):
    say("")
    say("## CA files missing, truncated, mismatched, deleted live")
    a = Appliance(scratch("ca"))
    a.start()
    key, pem = os.path.join(a.group, "ca.key"), os.path.join(a.group, "ca.pem")
    with open(key, "rb") as f:
        good_key = f.read()
    body = b"".join(l for l in good_key.splitlines() if not l.startswith(b"-----"))
    rows = []

    def check(name):
        seen = {}

        def off():
            s = a.status()
            seen["ca"] = (s.get("ca") or {}).get("error")
            seen["https"] = (s.get("tunnel") or {}).get("interception") or ""
            return seen["ca"] and seen["https"].startswith("off")
        reported = wait_until("status reports %s" % name, off, 5)
        text = a.cli("status").stdout + json.dumps(a.status()) + open(a.log, "rb").read().decode("utf-8", "replace")
        leaked = any(body[i:i + 12].decode() in text for i in range(0, len(body) - 12, 6))
        rows.append("| %s | %s | %s |" % (name, seen.get("ca"), "**yes**" if leaked else "no"))
        must(reported and not leaked, "CA %s: reported %s, leaked %s" % (name, reported, leaked))

    def restore():
        with open(key + ".tmp", "wb") as f:
            f.write(good_key)
        os.chmod(key + ".tmp", 0o640)
        os.rename(key + ".tmp", key)
        wait_until("interception is back on", lambda: (a.status().get("tunnel") or {}).get("interception") == "on", 5)

    os.unlink(key)
    check("ca.key deleted live")
    restore()
    with open(key, "wb") as f:
        f.write(good_key[:len(good_key) - 40])
    check("ca.key truncated")
    restore()
    other = subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"], capture_output=True).stdout
    subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-out", key], input=other, capture_output=True)
    check("ca.key of another CA")
    restore()
    with open(pem, "rb") as f:
        good_pem = f.read()
    os.unlink(pem)
    check("ca.pem deleted live")
    with open(pem, "wb") as f:
        f.write(good_pem)
    restore()
    say("| how | what `busymate status` says | key bytes in status or log |")
    say("|---|---|---|")
    for row in rows:
        say(row)
    a.stop()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--report", default=None)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--only", default=None, help="run one step, e.g. tunnel_kills")
    ARGS = parser.parse_args()
    if os.geteuid() != 0:
        print("faults: skipped: the suite kills the tunnel (another user) and mounts a tmpfs; run it as root")
        return 0
    origin = start_origin()
    started = time.time()
    say("# Fault suite")
    say("")
    say("From `make test-faults` (`tests/faults/run.py`), the real binaries in `%s`, %s." % (ARGS.bin, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    say("")
    steps = (tunnel_kills, supervisor_kill, clean_stop, tunnel_restarts, broken_settings, disk_full, corrupt_store, locks, ca_files)
    if ARGS.only:
        steps = tuple(s for s in steps if s.__name__ == ARGS.only)
    failed_steps = 0
    for step in steps:
        before = len(FAILURES)
        try:
            step(origin)
        except Exception as e:
            must(False, "%s raised %r" % (step.__name__, e))
        failed_steps += len(FAILURES) > before
    say("")
    say("%d checks failed; %.0f s in all." % (len(FAILURES), time.time() - started))
    if ARGS.report:
        with open(ARGS.report, "w") as f:
            f.write("\n".join(REPORT) + "\n")
    print("faults: %d passed, %d failed" % (len(steps) - failed_steps, failed_steps))
    return 1 if FAILURES else 0


sys.exit(main())
