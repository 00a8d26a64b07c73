#!/usr/bin/env python3
"""Busymate against its peer, mitmdump 12.3.1: the same requests (curl)
through both, the same filter in both.

1. A filter as mitmproxy's modify_headers and block_list take it, and as a
   Busymate headers / block / drop rule's match: the same requests edited or
   blocked, and the same responses edited.
2. The same filter over the captured traffic: mitmdump's flow file read back
   with the filter (`mitmdump -nr FILE FILTER`) and `busymate list --json
   FILTER`: the same requests selected.
3. SOCKS5: mitmdump --mode socks5 and Busymate's proxy port, with
   curl --socks5-hostname and --socks5: the same answers, HTTPS decrypted by
   both (curl trusts only the proxy's CA).

usage: run.py --bin DIR [--keep] [--only list_filters,rule_filters,block_rules,socks]
mitmdump comes from bench/install-mitmproxy.sh (a venv under .build, made
once); if it cannot be installed the suite fails with the reason. Run as root
(Busymate's tunnel runs as its own user). Traffic stays on loopback.
"""
import argparse, concurrent.futures, hashlib, json, os, re, shutil, signal, subprocess, sys, tempfile, time
from urllib.parse import quote

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases, origin  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ARGS = None
FAILURES = []
PASSED = []
NOTED = []


def check(condition, what, detail=""):
    if condition:
        PASSED.append(what)
        print("ok: " + what, flush=True)
    else:
        FAILURES.append(what)
        print("FAIL: " + what + (": " + detail if detail else ""), flush=True)
    return condition


def note(what):
    NOTED.append(what)
    print("differs (documented): " + what, flush=True)


def wait_until(condition, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception:
            pass
        time.sleep(step)
    return None


# --- mitmdump ---------------------------------------------------------------

def install_mitmdump():
    r = subprocess.run([os.path.join(REPO, "bench", "install-mitmproxy.sh")], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        return None, reason
    return os.path.join(REPO, r.stdout.strip().splitlines()[-1]), None


class Mitmdump:
    """mitmdump on a port of its own choosing; its CA in a confdir of its own."""

    def __init__(self, binary, base, name, args):
        self.binary, self.confdir = binary, os.path.join(base, "mitm-conf")
        self.log = os.path.join(base, "mitmdump-%s.log" % name)
        command = [binary, "--listen-host", "127.0.0.1", "--listen-port", "0", "--ssl-insecure",
                   "--set", "confdir=" + self.confdir, "--flow-detail", "0"] + args
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.port = wait_until(lambda: self.bound_port() or (-1 if self.process.poll() is not None else None), 20)
        if not self.port or self.port < 0:
            raise RuntimeError("mitmdump did not listen: %s" % open(self.log).read()[-2000:])
        self.ca = os.path.join(self.confdir, "mitmproxy-ca-cert.pem")

    def bound_port(self):
        match = re.search(r"listening at \S+:(\d+)", open(self.log).read())
        return int(match.group(1)) if match else None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # it writes out its flow file and exits
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- Busymate ---------------------------------------------------------------

class Busymate:
    def __init__(self, base):
        self.group = os.path.join(base, "group")
        os.makedirs(self.group)
        self.settings_path = os.path.join(self.group, "settings.json")
        self.log = os.path.join(base, "busymate.log")
        self.write_settings([])
        env = dict(os.environ, BUSYMATE_LOG="stderr")
        env.pop("NOTIFY_SOCKET", None)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([os.path.join(ARGS.bin, "busymate-app"), "--group", self.group],
                                            stdout=subprocess.DEVNULL, stderr=log, env=env)
        if not wait_until(lambda: self.process.poll() is not None or (self.status().get("tunnel") or {}).get("state") == "ready", 30, 0.2) \
                or self.process.poll() is not None:
            raise RuntimeError("Busymate's tunnel was not ready: %s" % open(self.log).read()[-2000:])
        self.wait_applied()
        self.port = next(int(l["bound"].rsplit(":", 1)[1]) for l in self.status()["listeners"] if l.get("bound"))
        self.ca = os.path.join(self.group, "ca.pem")

    def cli(self, *args):
        return subprocess.run([os.path.join(ARGS.bin, "busymate")] + list(args) + ["--group", self.group],
                              capture_output=True, text=True, timeout=60)

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def write_settings(self, rules):
        settings = {"log_level": "info", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"},
                    "tunnel": {"drain_seconds": 1},
                    "ssl_proxying": {"include": ["localhost"], "insecure_upstream": ["localhost"]},
                    "rules": rules}
        text = json.dumps(settings, indent=1) + "\n"
        with open(self.settings_path + ".tmp", "w") as f:
            f.write(text)
        os.chmod(self.settings_path + ".tmp", 0o664)
        os.rename(self.settings_path + ".tmp", self.settings_path)
        self.sha = hashlib.sha256(text.encode()).hexdigest()

    def wait_applied(self):
        if not wait_until(lambda: (self.status().get("tunnel") or {}).get("settings_sha256") == self.sha, 15, 0.1):
            raise RuntimeError("the tunnel did not apply settings.json: %s" % self.cli("status").stdout)

    def set_rules(self, rules):
        self.write_settings(rules)
        self.wait_applied()

    def list_ids(self, expression):
        r = self.cli("list", "--json", "--limit", "1000", expression)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return {request_id(row["url"]) for row in json.loads(r.stdout)} - {None}, None

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()


# --- requests ---------------------------------------------------------------

PORTS = {}


def url_of(n, target, path):
    host = {"plain": "127.0.0.1:%d" % PORTS["plain"], "plain-localhost": "localhost:%d" % PORTS["plain"],
            "tls": "localhost:%d" % PORTS["tls"], "dead": "127.0.0.1:%d" % PORTS["dead"]}[target]
    scheme = "https" if target == "tls" else "http"
    return "%s://%s%s%sn=%02d" % (scheme, host, path, "&" if "?" in path else "?", n)


def request_id(url):
    match = re.search(r"[?&]n=(\d\d)(?:&|$)", url or "")
    return int(match.group(1)) if match else None


def curl(proxy, n, request, ca):
    """One request through a proxy (`-x URL`, or curl's --socks5 options); what the client saw."""
    method, target, path, headers, body = request
    with tempfile.NamedTemporaryFile("r", prefix="peers-head-") as head:
        command = ["curl", "-sS", "--max-time", "15", "-D", head.name, "-w", "\n@code %{http_code}", "--cacert", ca] + proxy
        command += ["-I"] if method == "HEAD" else ["-X", method]
        for header in headers:
            command += ["-H", header]
        if body is not None:
            command += ["--data-binary", body]
        r = subprocess.run(command + [url_of(n, target, path)], capture_output=True, timeout=30)
        text = head.read()
    out, _, code = r.stdout.decode("latin-1").rpartition("\n@code ")
    # The last header block is the origin's answer (an HTTPS one follows CONNECT's).
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.startswith("HTTP/")]
    response = {}
    for line in (blocks[-1].splitlines()[1:] if blocks else []):
        name, _, value = line.partition(":")
        response[name.strip().lower()] = value.strip()
    seen = set(filter(None, response.get("x-seen", "").split(","))) - {"none"}
    return {"code": code.strip() or "000", "headers": response, "seen": seen, "body": out if method != "HEAD" else "",
            "exit": r.returncode, "stderr": r.stderr.decode("latin-1").strip()}


def send_all(proxy, ca):
    """Every request once; curl runs four at a time (the answers don't depend on order)."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = {n: pool.submit(curl, proxy, n, request, ca) for n, request in enumerate(cases.REQUESTS)}
        return {n: f.result() for n, f in futures.items()}


def describe(ids):
    return ", ".join("%02d %s %s" % (n, cases.REQUESTS[n][0], url_of(n, cases.REQUESTS[n][1], cases.REQUESTS[n][2]).split("/", 3)[-1])
                     for n in sorted(ids)) or "(none)"


def compare(what, mitm, busy, difference=None, bug=None):
    """mitmdump's set of request numbers against Busymate's; a named difference is reported, not failed."""
    if mitm == busy:
        return check(True, what + " (%d of %d)" % (len(mitm), len(cases.REQUESTS)))
    detail = "only mitmdump: %s; only Busymate: %s" % (describe(mitm - busy), describe(busy - mitm))
    if bug:
        detail += " (%s)" % bug
    if difference:
        note("%s: %s (%s)" % (what, difference, detail))
        return True
    return check(False, what, detail)


# --- 1. filters in rules ----------------------------------------------------

def headers_rule(expression):
    return {"name": "peer", "match": expression, "action": "headers",
            "request": {"set": {"X-Tag": "yes"}}, "response": {"set": {"X-Tag": "yes"}}}


def rule_filters(mitmdump, busymate, base):
    print("# 1. a filter in mitmdump's modify_headers and in a Busymate headers rule", flush=True)
    specs = []
    for i, expression in enumerate(cases.RULE_FILTERS):
        assert "#" not in expression
        specs += ["--modify-headers", "#%s#X-F%02d#yes" % (expression, i)]
    mitm = Mitmdump(mitmdump, base, "headers", specs)
    try:
        through_mitm = send_all(["-x", "http://127.0.0.1:%d" % mitm.port], mitm.ca)
    finally:
        mitm.stop()
    # Each filter edits something through mitmdump, so an equality below is not two empty sets.
    idle = [e for i, e in enumerate(cases.RULE_FILTERS) if e not in cases.RULE_DIFFERENCES
            and not any("x-f%02d" % i in r["seen"] or "x-f%02d" % i in r["headers"] for r in through_mitm.values())]
    check(not idle, "each filter edits some request or response through mitmdump", "none for %s" % idle)
    for i, expression in enumerate(cases.RULE_FILTERS):
        marker = "x-f%02d" % i
        mitm_request = {n for n, r in through_mitm.items() if marker in r["seen"]}
        mitm_response = {n for n, r in through_mitm.items() if marker in r["headers"]}
        try:
            busymate.set_rules([headers_rule(expression)])
        except RuntimeError as e:
            check(False, "Busymate takes the headers rule %r" % expression, str(e))
            continue
        through_busymate = send_all(["-x", "http://127.0.0.1:%d" % busymate.port], busymate.ca)
        busy_request = {n for n, r in through_busymate.items() if "x-tag" in r["seen"]}
        busy_response = {n for n, r in through_busymate.items() if "x-tag" in r["headers"]}
        difference = cases.RULE_DIFFERENCES.get(expression)
        compare("headers %r: the same requests edited on the way in" % expression, mitm_request, busy_request, difference)
        compare("headers %r: the same responses edited on the way out" % expression, mitm_response, busy_response, difference,
                cases.RULE_BUGS.get(expression))
    busymate.set_rules([])
    # mitmdump's modify_headers takes a body filter (tested when the body has come); a Busymate rule refuses one, saying why.
    refused = busymate.cli("rules", "add", "--json", json.dumps(dict(headers_rule("~bq token"), name="body")))
    if check(refused.returncode != 0 and "body streams" in refused.stderr, "Busymate refuses a rule matching with ~bq, with the reason",
             "exit %d: %s" % (refused.returncode, refused.stderr.strip())):
        note("a body clause (~b, ~bq, ~bs) in a rule: mitmproxy's modify_headers tests it once the body came, Busymate refuses it (docs/usage.md: Rules): %s"
             % refused.stderr.strip())


def block_rules(mitmdump, busymate, base):
    print("# 1b. a filter in mitmdump's block_list and in a Busymate block (444: drop) rule", flush=True)
    for expression, status in cases.BLOCK_FILTERS:
        mitm = Mitmdump(mitmdump, base, "block", ["--set", "block_list=#%s#%d" % (expression, status)])
        try:
            through_mitm = send_all(["-x", "http://127.0.0.1:%d" % mitm.port], mitm.ca)
        finally:
            mitm.stop()
        rule = {"name": "peer", "match": expression, "action": "drop"} if status == 444 else \
            {"name": "peer", "match": expression, "action": "block", "status": status}
        try:
            busymate.set_rules([rule])
        except RuntimeError as e:
            check(False, "Busymate takes the %s rule %r" % (rule["action"], expression), str(e))
            continue
        through_busymate = send_all(["-x", "http://127.0.0.1:%d" % busymate.port], busymate.ca)

        def blocked(results):
            if status == 444:  # closed without an answer
                return {n for n, r in results.items() if r["code"] == "000" and r["exit"] != 0}
            return {n for n, r in results.items() if r["code"] == str(status) and "x-seen" not in r["headers"]}
        compare("block_list %r %d and a Busymate %s rule: the same requests %s" % (expression, status, rule["action"], "dropped" if status == 444 else "blocked"),
                blocked(through_mitm), blocked(through_busymate))
        # The rest reached the origin through both.
        answered = lambda results: {n for n, r in results.items() if "x-seen" in r["headers"]}
        compare("block_list %r %d: the same requests answered by the origin" % (expression, status),
                answered(through_mitm), answered(through_busymate))
    busymate.set_rules([])


# --- 2. filters over captured traffic ---------------------------------------

def mitm_read(mitmdump, flows, expression):
    """`mitmdump -nr FLOWS FILTER`: the flows it prints, by request number."""
    r = subprocess.run([mitmdump, "-n", "-r", flows, "--flow-detail", "1", expression], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-500:]
    return {request_id(m.group(0)) for m in re.finditer(r"[?&]n=\d\d(?=&|\s|$)", r.stdout, re.M)}, None


def mitm_select(mitmdump, flows, expressions, base):
    """Every filter over the flow file in one mitmdump start (select_flows.py), by request number."""
    out = os.path.join(base, "selected.json")
    env = dict(os.environ, PEERS_FILTERS=json.dumps(expressions), PEERS_SELECTED=out)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "select_flows.py")
    r = subprocess.run([mitmdump, "-n", "-r", flows, "-s", script, "--flow-detail", "0"], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError("mitmdump -s select_flows.py: %s" % (r.stderr or r.stdout)[-1000:])
    with open(out) as f:
        selected = json.load(f)
    return {e: (None, v["error"]) if isinstance(v, dict) else ({request_id(u) for u in v} - {None}, None) for e, v in selected.items()}


def list_filters(mitmdump, busymate, base):
    print("# 2. a filter over the captured traffic: mitmdump -nr FLOWS FILTER and busymate list FILTER", flush=True)
    flows = os.path.join(base, "flows.mitm")
    mitm = Mitmdump(mitmdump, base, "capture", ["-w", flows])
    try:
        send_all(["-x", "http://127.0.0.1:%d" % mitm.port], mitm.ca)
    finally:
        mitm.stop()
    send_all(["-x", "http://127.0.0.1:%d" % busymate.port], busymate.ca)
    everything = set(range(len(cases.REQUESTS)))
    stored = wait_until(lambda: busymate.list_ids("~all")[0] >= everything, 15, 0.2)
    check(bool(stored), "Busymate stored every request", describe(everything - (busymate.list_ids("~all")[0] or set())))
    all_mitm, error = mitm_read(mitmdump, flows, "~all")
    check(all_mitm == everything, "mitmdump's flow file holds every request", error or describe(everything - (all_mitm or set())))
    translated = [cases.LIST_EXTENSIONS.get(e, (e,))[0] for e in cases.LIST_FILTERS]
    selected = mitm_select(mitmdump, flows, translated, base)
    # The addon tests each flow as `mitmdump -nr FLOWS FILTER` does: the same answer, filter by filter.
    assert set(cases.CLI_FILTERS) <= set(translated)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        by_cli = list(pool.map(lambda e: (e, mitm_read(mitmdump, flows, e)), cases.CLI_FILTERS))
    for expression, answer in by_cli:
        check(answer == selected.get(expression), "mitmdump -nr FLOWS %r selects as the addon's parse of it does" % expression,
              "command line %s, addon %s" % (answer, selected.get(expression)))
    results = [(e, selected[t], busymate.list_ids(e)) for e, t in zip(cases.LIST_FILTERS, translated)]
    failed = {cases.REQUESTS.index(r) for r in cases.REQUESTS if r[2] in cases.LIST_DIFFERENCES["failed"]}
    for expression, (mitm_ids, mitm_error), (busy_ids, busy_error) in results:
        what = "list %r: the same requests selected" % expression
        if expression in cases.LIST_EXTENSIONS:
            what = "list %r (mitmdump: %r): the same requests selected" % (expression, cases.LIST_EXTENSIONS[expression][0])
            note("%s: %s" % (expression, cases.LIST_EXTENSIONS[expression][1]))
        if mitm_error or busy_error:
            check(False, "both take the filter %r" % expression, "mitmdump: %s; busymate: %s" % (mitm_error, busy_error))
            continue
        if expression in cases.LIST_DIFFERENCES["filters"] and mitm_ids != busy_ids and (mitm_ids ^ busy_ids) <= failed:
            note("%s except %s: %s (mitmdump: %s; Busymate: %s)" % (what, describe(mitm_ids ^ busy_ids), cases.LIST_DIFFERENCES["why"],
                                                                describe(mitm_ids & failed), describe(busy_ids & failed)))
            continue
        compare(what, mitm_ids, busy_ids, cases.RULE_DIFFERENCES.get(expression))


# --- 3. SOCKS5 ---------------------------------------------------------------

SOCKS_REQUESTS = [
    ("GET", "plain", "/echo", [], None),
    ("GET", "plain-localhost", "/echo", [], None),
    ("POST", "tls", "/secure", ["Content-Type: text/plain"], "socks body"),
    ("GET", "tls", "/json", [], None),
]


def socks(mitmdump, busymate, base):
    print("# 3. SOCKS5: mitmdump --mode socks5 and Busymate's proxy port", flush=True)
    flows = os.path.join(base, "socks.mitm")
    mitm = Mitmdump(mitmdump, base, "socks", ["--mode", "socks5", "-w", flows])
    results = []
    try:
        for option in ("--socks5-hostname", "--socks5"):
            for k, request in enumerate(SOCKS_REQUESTS):
                n = 60 + k + (10 if option == "--socks5" else 0)
                through_mitm = curl([option, "127.0.0.1:%d" % mitm.port], n, request, mitm.ca)
                through_busymate = curl([option, "127.0.0.1:%d" % busymate.port], n, request, busymate.ca)
                results.append((option, n, request, through_mitm, through_busymate))
    finally:
        mitm.stop()
    for option, n, request, m, b in results:
        what = "%s %s %s" % (option, request[0], url_of(n, request[1], request[2]).split("/", 3)[-1])
        same = m["code"] == b["code"] == "200" and m["body"] == b["body"] and m["headers"].get("content-type") == b["headers"].get("content-type")
        check(same, "%s (%s): the same origin answers through both" % (what, request[1]),
              "mitmdump %s %r (%s); Busymate %s %r (%s)" % (m["code"], m["body"][:200], m["stderr"], b["code"], b["body"][:200], b["stderr"]))
    decrypted_mitm, error = mitm_read(mitmdump, flows, "~u ^https://")
    https = {n for option, n, request, m, b in results if request[1] == "tls"}
    check(decrypted_mitm == https, "mitmdump decrypted each HTTPS request over SOCKS5 (its flow file has them)", error or describe(https - (decrypted_mitm or set())))
    rows = json.loads(busymate.cli("list", "--json", "--limit", "100", "~u ^https:// & ~tls mitm").stdout or "[]")
    decrypted_busy = {request_id(row["url"]) for row in rows if row.get("front_end") == "socks5"}
    check(https <= decrypted_busy, "Busymate decrypted each HTTPS request over SOCKS5 (rows with tls mitm, front_end socks5)",
          "missing %s" % sorted(https - decrypted_busy))


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the directory with busymate-app, busymate-tunnel and busymate")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--only", default="list_filters,rule_filters,block_rules,socks", help="the parts to run, comma-separated")
    ARGS = parser.parse_args()
    started = time.monotonic()
    mitmdump, reason = install_mitmdump()
    if not mitmdump:
        check(False, "mitmdump 12.3.1 installed (bench/install-mitmproxy.sh)", reason)
        print("peers: 0 passed, 1 failed: mitmdump is needed to compare with it", flush=True)
        return 1
    base = tempfile.mkdtemp(prefix="bmpeers-", dir="/tmp")
    os.chmod(base, 0o755)
    PORTS["plain"], PORTS["tls"] = origin.start(base)
    PORTS["dead"] = origin.dead_port()
    busymate = None
    try:
        busymate = Busymate(base)
        # Over a store with nothing else in it first.
        for part in [globals()[name] for name in ARGS.only.split(",")]:
            began = time.monotonic()
            part(mitmdump, busymate, base)
            print("(%s: %.0f s)" % (part.__name__, time.monotonic() - began), flush=True)
    except Exception as e:
        check(False, "the suite ran to its end", "%s: %s" % (type(e).__name__, e))
    finally:
        if busymate:
            busymate.stop()
        if not ARGS.keep:
            shutil.rmtree(base, ignore_errors=True)
    print("peers: %d passed, %d failed, %d documented differences, %.0f s%s" % (
        len(PASSED), len(FAILURES), len(NOTED), time.monotonic() - started, " (kept %s)" % base if ARGS.keep else ""), flush=True)
    for failure in FAILURES:
        print("  failed: " + failure)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
