"""The HTTP/2 suite's harness: results by case, the test CA, the peers'
processes, Busymate on a temp group, curl, RSS sampling."""
import hashlib, json, os, re, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = []  # (case, check, ok, detail)
CURRENT = ["-"]


def check(ok, what, detail=""):
    ok = bool(ok)
    RESULTS.append((CURRENT[0], what, ok, "" if ok else detail))
    print(("ok: " if ok else "FAIL: ") + "[%s] %s%s" % (CURRENT[0], what, "" if ok else ": " + str(detail)[:1500]), flush=True)
    return ok


def note(what):
    RESULTS.append((CURRENT[0], what, None, ""))
    print("note: [%s] %s" % (CURRENT[0], what), flush=True)


def wait_until(condition, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception:
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(step)


def run(cmd, timeout=60, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or b"", (e.stderr or b"") + b"(timed out)"


def make_certs(base):
    """A test CA and a leaf for localhost / 127.0.0.1 it signs: the origins' TLS, trusted by Busymate
    through ssl_proxying.upstream_trust (and by the direct gRPC client)."""
    d = os.path.join(base, "certs")
    os.makedirs(d)
    p = lambda name: os.path.join(d, name)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["openssl", "req", "-x509"] + ec + ["-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=Busymate h2 suite test CA",
                                            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", "-new"] + ec + ["-keyout", p("origin.key"), "-out", p("origin.csr"), "-subj", "/CN=localhost"],
        ["openssl", "x509", "-req", "-in", p("origin.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
         "-days", "2", "-sha256", "-extfile", p("leaf.ext"), "-out", p("origin.pem")],
    ]
    with open(p("leaf.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for cmd in steps:
        rc, out, err = run(cmd)
        if rc != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd[:3]), err.decode()[-500:]))
    with open(p("chain.pem"), "w") as f:
        f.write(open(p("origin.pem")).read() + open(p("ca.pem")).read())
    for name in os.listdir(d):
        os.chmod(p(name), 0o644)  # the tunnel (user busymate) reads ca.pem
    return {"ca": p("ca.pem"), "chain": p("chain.pem"), "key": p("origin.key")}


class Peer:
    """A helper script serving on port 0; its ports come back in a JSON file."""

    def __init__(self, base, name, args):
        self.out, self.log = os.path.join(base, name + ".json"), os.path.join(base, name + ".log")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable] + args + ["--out", self.out], stdout=log, stderr=subprocess.STDOUT)
        if not wait_until(lambda: os.path.exists(self.out) or self.process.poll() is not None, 30):
            raise RuntimeError("%s did not start" % name)
        if self.process.poll() is not None:
            raise RuntimeError("%s exited: %s" % (name, open(self.log).read()[-2000:]))
        self.ports = json.load(open(self.out))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Busymate:
    def __init__(self, base, bin_dir, trust):
        self.bin, self.trust = bin_dir, trust
        self.group = os.path.join(base, "group")
        os.makedirs(self.group)
        self.settings_path = os.path.join(self.group, "settings.json")
        self.log = os.path.join(base, "busymate.log")
        self.write_settings()
        env = dict(os.environ, BUSYMATE_LOG="stderr")
        env.pop("NOTIFY_SOCKET", None)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([os.path.join(bin_dir, "busymate-app"), "--group", self.group],
                                            stdout=subprocess.DEVNULL, stderr=log, env=env)
        if not wait_until(lambda: self.process.poll() is not None or self.tunnel().get("state") == "ready", 30, 0.2) \
                or self.process.poll() is not None:
            raise RuntimeError("Busymate's tunnel was not ready: %s" % open(self.log).read()[-2000:])
        self.wait_applied()
        self.port = next(int(l["bound"].rsplit(":", 1)[1]) for l in self.status()["listeners"] if l.get("bound"))
        self.ca = os.path.join(self.group, "ca.pem")

    def cli(self, *args):
        r = subprocess.run([os.path.join(self.bin, "busymate")] + list(args) + ["--group", self.group],
                           capture_output=True, text=True, timeout=60)
        return r

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def tunnel(self):
        return self.status().get("tunnel") or {}

    def write_settings(self, proxy=None, **extra):
        settings = {"log_level": "info", "proxy": dict({"listen": ["127.0.0.1:0"]}, **(proxy or {})), "web": {"listen": "127.0.0.1:0"},
                    "tunnel": {"drain_seconds": 3},  # long enough for goaway_drain's streams on a busy machine
                    "ssl_proxying": {"include": ["localhost"], "upstream_trust": self.trust}}
        settings.update(extra)
        text = json.dumps(settings, indent=1) + "\n"
        with open(self.settings_path + ".tmp", "w") as f:
            f.write(text)
        os.chmod(self.settings_path + ".tmp", 0o664)
        os.rename(self.settings_path + ".tmp", self.settings_path)
        self.sha = hashlib.sha256(text.encode()).hexdigest()

    def wait_applied(self, timeout=15):
        if not wait_until(lambda: self.tunnel().get("settings_sha256") == self.sha, timeout, 0.1):
            raise RuntimeError("the tunnel did not apply settings.json: %s" % self.cli("status").stdout.strip()[-800:])

    def rows(self, expression, expect=1, timeout=10):
        """`list --json` rows matching expression, once at least expect of them are stored."""
        def get():
            r = self.cli("list", "--json", "--limit", "1000", expression)
            rows = json.loads(r.stdout) if r.returncode == 0 else None
            return rows if rows is not None and len(rows) >= expect else None
        found = wait_until(get, timeout, 0.25)
        if found is None:
            r = self.cli("list", "--json", "--limit", "1000", expression)
            return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
        return found

    def select(self, expression):
        """`list --json EXPRESSION` now: (rows, None), or (None, the CLI's error) when it refuses the filter."""
        r = self.cli("list", "--json", "--limit", "1000", expression)
        if r.returncode != 0:
            return None, r.stderr.strip()[-300:]
        return json.loads(r.stdout), None

    def show(self, row_id):
        out = json.loads(self.cli("show", "--json", str(row_id)).stdout)
        return out[0] if isinstance(out, list) else out

    def tunnel_pid(self):
        return self.tunnel().get("pid")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()


def rss_kb(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, TypeError):
        return None
    return None


class RSSSampler:
    """The peak VmRSS of a process while a block runs (sampled every 50 ms)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, rss_kb(pid) or 0, threading.Event()
        self.before = self.peak

    def __enter__(self):
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def sample(self):
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_kb(self.pid) or 0)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


def curl(proxy_port, ca, urls, *extra, timeout=20):
    """curl through the explicit proxy, one or more URLs in one invocation (connections reused):
    per URL its status, HTTP version and body; curl's exit code and its verbose log."""
    out_files, command = [], ["curl", "-sS", "-v", "--max-time", str(timeout), "-x", "http://127.0.0.1:%d" % proxy_port]
    if ca:
        command += ["--cacert", ca]
    command += list(extra)
    with tempfile.TemporaryDirectory(prefix="h2curl-") as d:
        for i, url in enumerate(urls):
            out_files.append(os.path.join(d, "body-%d" % i))
            command += ["-o", out_files[-1], "-w", "##%{http_code} %{http_version}\n", url]
        rc, out, err = run(command, timeout=timeout + 10)
        marks = re.findall(r"##(\d+) (\S+)", out.decode())
        results = []
        for i, path in enumerate(out_files):
            body = open(path, "rb").read() if os.path.exists(path) else b""
            code, version = marks[i] if i < len(marks) else ("000", "0")
            results.append({"code": code, "version": version, "body": body})
    return results, rc, err.decode("latin-1")


def body_json(body):
    try:
        return json.loads(body)
    except ValueError:
        return None
