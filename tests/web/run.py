#!/usr/bin/env python3
"""The web page end to end: the real binaries (supervisor, tunnel, web
front), a real origin on loopback, curl as the client, and Debian's
Chromium driven by Selenium, headless. Each step saves a screenshot in
--shots (look at them: the page should look like a tool people want to use).

usage: run.py --bin DIR [--shots DIR]
Run as root (the children drop to user busymate). Traffic stays on loopback.
"""
import random
import argparse, gzip, json, os, shutil, subprocess, sys, tempfile, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ARGS = None
PASSED = []
FAILED = []
RECEIVED = []  # bodies the origin got on /echo and /hold
POOL = random.randrange(20000, 60000, 10)  # devices.port_pool: ten ports, unlikely to be taken
IDLE_SECONDS = 5  # devices.idle_seconds: a device goes offline this long after its last request
JSON_BODY = b'{"zebra": 1, "apple": {"b": 2, "a": 1}, "big": 12345678901234567890, "list": [3, 1, 2]}'
# 1 MiB whose last 16 bytes only a hex view scrolled to its end shows.
BIG_TAIL = b"THE-LAST-BYTES!!"
BIG_BODY = bytes(range(256)) * 4095 + bytes(240) + BIG_TAIL


def check(ok, what):
    (PASSED if ok else FAILED).append(what)
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    return ok


class Origin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, body, ctype="text/plain", extra=()):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/data.json"):
            self.reply(gzip.compress(JSON_BODY), "application/json", [("Content-Encoding", "gzip")])
        elif self.path.startswith("/big.bin"):
            self.reply(BIG_BODY, "application/octet-stream")
        elif self.path.startswith("/hdr"):
            self.reply("".join("%s: %s\n" % (k, v) for k, v in self.headers.items()).encode())
        else:
            self.reply(("origin " + self.path).encode())

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        RECEIVED.append((self.path, body))
        self.reply(b"got " + body)

    def log_message(self, *args):
        pass


def start_origin():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def stable(read, tries=40):
    """read() again while the live page replaces the elements it reads."""
    for _ in range(tries - 1):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read()


def wait_until(what, predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return True
        except Exception:
            pass
        time.sleep(0.05)
    raise TimeoutError("timed out waiting until " + what)


class Appliance:
    def __init__(self, base, origin):
        self.group = os.path.join(base, "group")
        os.makedirs(self.group)
        os.chmod(base, 0o755)
        settings = {
            "log_level": "info", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"},
            "tunnel": {"drain_seconds": 2},
            "ssl_proxying": {"include": ["secure.example.com"], "exclude": []},
            "breakpoints": {"request": ["127.0.0.1:%d/hold*" % origin], "timeout_seconds": 60},
            # Every client here is on loopback: it is the device "laptop", known by its address.
            "devices": {"list": [{"name": "laptop", "address": "127.0.0.1"}], "idle_seconds": IDLE_SECONDS, "host": "127.0.0.1",
                        "port_pool": "%d-%d" % (POOL, POOL + 9)},
            # Enrolment links point here.
            "onboarding": {"listen": "127.0.0.1:0"},
        }
        with open(os.path.join(self.group, "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)
        self.log = open(os.path.join(base, "supervisor.log"), "ab")
        env = dict(os.environ, BUSYMATE_LOG="stderr")
        env.pop("NOTIFY_SOCKET", None)
        self.process = subprocess.Popen([os.path.join(ARGS.bin, "busymate-app"), "--group", self.group], stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        wait_until("the tunnel and the web front are ready", lambda: self.status()["tunnel"]["state"] == "ready" and self.status()["web"]["state"] == "ready", 30)

    def cli(self, *args):
        return subprocess.run([os.path.join(ARGS.bin, "busymate")] + list(args) + ["--group", self.group], capture_output=True, text=True, timeout=30)

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def proxy(self):
        return "http://" + self.status()["listeners"][0]["bound"]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def settings_rules(appliance):
    """The rules in settings.json; none while it is being written (the web
    front, not root, writes it in place: a reader may catch it half written)."""
    try:
        with open(os.path.join(appliance.group, "settings.json")) as f:
            return json.load(f).get("rules", [])
    except ValueError:
        return []


def curl(appliance, url, *extra):
    return subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", appliance.proxy(), "--max-time", "30"] + list(extra) + [url],
                          capture_output=True, text=True, timeout=40).stdout


def browser(downloads):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1440,900", "--no-proxy-server"]:
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver


class Page:
    def __init__(self, driver):
        self.d = driver
        self.step = 0

    def shot(self, name):
        self.step += 1
        path = os.path.join(ARGS.shots, "%02d-%s.png" % (self.step, name))
        self.d.save_screenshot(path)
        print("   screenshot " + path, flush=True)

    def find(self, css):
        return self.d.find_element(By.CSS_SELECTOR, css)

    def all(self, css):
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def wait(self, what, predicate, timeout=10):
        try:
            # The page redraws parts of itself (the status card every second).
            WebDriverWait(self.d, timeout, poll_frequency=0.02, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(lambda d: predicate())
            return True
        except TimeoutException:
            return False

    def row_paths(self):
        return [e.get_attribute("title") or e.text for e in self.all("#list-body .row[data-id] .c-path")]

    def row_for(self, path_part):
        for row in self.all("#list-body .row[data-id]"):
            cell = row.find_element(By.CSS_SELECTOR, ".c-path")
            if path_part in (cell.get_attribute("title") or cell.text):
                return row
        return None

    def set_filter(self, text):
        box = self.find("#filter")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        box.send_keys(text + Keys.ENTER)

    def errors(self):
        # Script errors and CSP violations; an API refusal the test provoked (a bad filter's 400) is the network's.
        return [e for e in self.d.get_log("browser") if e.get("level") == "SEVERE" and e.get("source") != "network"]


def run(appliance, origin, page, downloads):
    base = "http://127.0.0.1:%d" % origin
    url = appliance.cli("web", "url").stdout.strip()
    check(url.startswith("http://127.0.0.1:") and "/login?token=" in url, "busymate web url prints the page's address with its token: " + url.split("token=")[0] + "token=…")
    home = url.split("/login")[0] + "/"
    # Without the token: the login page, nothing else.
    page.d.get(home)
    check(page.wait("the login form", lambda: page.d.current_url.endswith("/login") and page.find("#token").is_displayed()), "without the token the page is the login form")
    page.shot("login")
    page.d.get(url)
    check(page.wait("live", lambda: page.find("#live-state").text.strip() == "live", 15), "the token opens the page and its live feed connects")
    check("token=" not in page.d.current_url, "the token leaves the address bar")
    empty = page.find("#empty-state").text if page.find("#empty-state").is_displayed() else ""
    check("busymate ssl-proxying add" in empty and "ca.pem" in empty and "--cacert" in empty and "curl -x http://" in empty,
          "the empty list says how to make a first capture, the decrypted HTTPS one included: %r" % empty[:400])
    page.shot("empty")

    # 1. Live: a request through the proxy appears while the page is open.
    started = time.time()
    code = curl(appliance, base + "/live/first")
    seen = page.wait("the row", lambda: page.row_for("/live/first") is not None, 10)
    latency = time.time() - started
    check(code == "200" and seen, "a curl through the proxy appears in the open page (%.2f s after curl started, curl included)" % latency)
    host_cell = stable(lambda: page.row_for("/live/first").find_element(By.CSS_SELECTOR, ".c-host").text)
    check(host_cell == "127.0.0.1:%d" % origin, "the Host column keeps a port that is not the scheme's default: %r" % host_cell)
    for i in range(5):
        curl(appliance, base + "/plain/%d" % i)
    curl(appliance, base + "/data.json", "--compressed")
    page.wait("all rows", lambda: page.row_for("/data.json") is not None and page.row_for("/plain/4") is not None, 10)
    page.shot("live")

    # 2. A filter narrows the list; a bad one is refused with its position.
    page.set_filter("~u /plain/ & !~u /plain/0")
    check(page.wait("filtered", lambda: sorted(p.split("/")[-1] for p in page.row_paths()) == ["1", "2", "3", "4"]), "the filter narrows the list to what it keeps: %s" % page.row_paths())
    page.shot("filter")
    bad = "~u plain & ~nope"
    page.set_filter(bad)
    check(page.wait("the error", lambda: page.find("#filter-error").is_displayed() and "nope" in page.find("#filter-error").text), "a bad filter is shown with what is wrong")
    cli = appliance.cli("list", bad)
    cli_text = cli.stderr + cli.stdout
    position = bad.index("~nope") + 1
    shown = page.find("#filter-error").text
    check("position %d" % position in cli_text and "position %d:" % position in shown,
          "the page gives the bad filter's position as the CLI does (position %d): page %r, CLI %r" % (position, shown, cli_text.strip()[:120]))
    check(page.wait("no rows", lambda: page.row_paths() == [] and page.find("#filter-error").is_displayed()),
          "under a bad filter the list shows no rows it cannot vouch for: %s" % page.row_paths()[:5])
    page.shot("filter-error")
    page.set_filter("")
    page.wait("unfiltered", lambda: page.row_for("/data.json") is not None)

    # 3. Detail: the gzip JSON body decoded, keys in the order sent, numbers as written.
    page.row_for("/data.json").click()
    page.wait("detail", lambda: page.find("#detail").is_displayed())
    page.find("[data-tab=response]").click()
    ok = page.wait("the tree", lambda: len(page.all("#body-view .json-tree .json-key")) >= 3)
    keys = [k.text.strip('"') for k in page.all("#body-view .json-tree .json-key")]
    top = [k for k in keys if k in ("zebra", "apple", "big", "list")]
    check(ok and top == ["zebra", "apple", "big", "list"], "the decoded gzip JSON body shows its keys in the order sent: %s" % keys)
    check("12345678901234567890" in page.find("#body-view").text, "a number no double holds is shown as written")
    page.shot("detail-json")
    page.d.set_window_size(1280, 900)
    visible = lambda css: page.find("#list-header " + css).is_displayed() and page.find("#list-header " + css).size["width"] > 20 \
        and page.find("#list-header " + css).rect["x"] + page.find("#list-header " + css).size["width"] <= page.find("#list-pane").rect["x"] + page.find("#list-pane").size["width"]
    check(page.wait("the columns", lambda: page.find("#detail").is_displayed() and visible(".c-type") and visible(".c-tls")),
          "at 1280 px with the detail open the list keeps its Type and TLS columns")
    page.shot("detail-1280")
    page.d.set_window_size(1440, 900)

    # 3b. A 1 MiB body in the hex view is reachable to its last byte by scrolling.
    curl(appliance, base + "/big.bin")
    page.wait("the big row", lambda: page.row_for("/big.bin") is not None)
    page.row_for("/big.bin").click()
    page.wait("detail", lambda: page.find("#detail").is_displayed())
    page.find("[data-tab=response]").click()
    page.wait("the hex view", lambda: len(page.all("#body-view .hex-scroll")) == 1 or len(page.all("#body-view [data-test=hex-more]")) == 1, 10)
    reached = False
    deadline = time.time() + 20
    while time.time() < deadline and not reached:
        page.d.execute_script("const el = document.querySelector('#body-view .hex-scroll'); if (el) el.scrollTop = el.scrollHeight;")
        reached = page.wait("the last line", lambda: BIG_TAIL.decode() in page.find("#body-view").text, 1)
    check(reached, "a 1 MiB body's hex view scrolls to its last byte")
    page.shot("hex-end")

    # 3c. A gRPC call's request body: the gRPC view, chosen first, shows its messages' fields decoded without a schema.
    grpc_file = os.path.join(downloads, "grpc-request.bin")
    message = b"\x0a\x05hello\x12\x04\x08\xfe\xff\x03\x10" + bytes([0x96, 0x01])
    with open(grpc_file, "wb") as f:
        f.write(b"\x00" + len(message).to_bytes(4, "big") + message)
    curl(appliance, base + "/helloworld.Greeter/SayHello", "--data-binary", "@" + grpc_file, "-H", "Content-Type: application/grpc", "-H", "TE: trailers")
    page.wait("the gRPC row", lambda: page.row_for("/helloworld.Greeter/SayHello") is not None)
    page.row_for("/helloworld.Greeter/SayHello").click()
    page.wait("its detail", lambda: "SayHello" in page.find("#detail .d-url").text and len(page.all("#detail [data-tab=request]")) == 1, 10)
    page.find("#detail [data-tab=request]").click()
    shown = page.wait("the gRPC view", lambda: len(page.all("#body-view [data-test=grpc-message]")) == 1, 10)
    text = page.d.execute_script("return document.querySelector('#body-view').textContent") if shown else ""
    on = [b.text for b in page.all(".view-switch button.on")]
    check(shown and on == ["gRPC"] and "service helloworld.Greeter · method SayHello" in text
          and '1: "hello"\n2:\n  1: 65534  # sint: 32767\n2: 150  # sint: 75' in text,
          "a gRPC request body opens in the gRPC view with its fields decoded: %r" % text[:300])
    page.shot("detail-grpc")

    # 3c'. With grpc.descriptor_sets naming what protoc made of helloworld.proto, the same view names the fields it
    # describes (field 2 it does not: by number) and the message type.
    here = os.path.dirname(os.path.abspath(__file__))
    made = subprocess.run(["protoc", "--include_imports", "-I", here, "-o", os.path.join(appliance.group, "helloworld.pb"),
                           os.path.join(here, "helloworld.proto")], capture_output=True, text=True)
    settings_path = os.path.join(appliance.group, "settings.json")
    document = json.load(open(settings_path))
    document["grpc"] = {"descriptor_sets": ["helloworld.pb"]}
    with open(settings_path, "w") as f:
        json.dump(document, f, indent=2)
    page.row_for("/data.json").click()
    page.wait("another detail", lambda: "data.json" in page.find("#detail .d-url").text, 10)
    page.row_for("/helloworld.Greeter/SayHello").click()
    page.wait("its detail", lambda: "SayHello" in page.find("#detail .d-url").text and len(page.all("#detail [data-tab=request]")) == 1, 10)
    page.find("#detail [data-tab=request]").click()
    named = page.wait("the named fields", lambda: 'name (1): "hello"' in page.find("#body-view").text, 10)
    text = page.d.execute_script("return document.querySelector('#body-view').textContent") if named else page.find("#body-view").text
    check(made.returncode == 0 and named and 'name (1): "hello"\n2:\n  1: 65534  # sint: 32767\n2: 150  # sint: 75' in text
          and "helloworld.HelloRequest" in text,
          "with grpc.descriptor_sets the gRPC view names the fields the schema has, and shows the others by number: %r %s"
          % (text[:300], made.stderr[-300:]))
    page.shot("detail-grpc-named")
    del document["grpc"]
    with open(settings_path, "w") as f:
        json.dump(document, f, indent=2)

    # 3d. Mark and comment in the detail: the list shows them, the filter and the CLI find them.
    page.row_for("/data.json").click()
    page.wait("the mark button", lambda: page.find("#mark").is_displayed())
    page.find("#mark").click()
    marked_chips = lambda: [c for c in page.all("#list-body .row[data-id] .chip.marked")]
    marked = page.wait("the mark", lambda: page.find("#mark").text.strip() == "★ Marked" and len(marked_chips()) == 1, 10)
    if not marked:
        print("   mark button %r, chips %d" % (page.find("#mark").text, len(marked_chips())))
    comment = page.find("#comment")
    comment.send_keys("flaky on the second load" + Keys.ENTER)
    commented = page.wait("the comment", lambda: len(page.all("#list-body .row[data-id] .chip.comment")) == 1, 10)
    listed = json.loads(appliance.cli("list", "--json", "~marked & ~comment flaky").stdout or "[]")
    check(marked, "the detail's Mark button marks the row: the button says so and the list shows the mark")
    check(commented, "a comment typed in the detail shows in the list")
    check([r["url"].rsplit("/", 1)[-1] for r in listed] == ["data.json"] and listed[0]["marker"] == "default",
          "`busymate list ~marked & ~comment flaky` finds the row the page marked (%s)" % listed)
    page.set_filter("~comment flaky")
    check(page.wait("filtered to the comment", lambda: [p.rsplit("/", 1)[-1] for p in page.row_paths()] == ["data.json"]),
          "the page's filter ~comment finds it: %s" % page.row_paths())
    page.shot("marked")
    page.set_filter("")
    page.wait("unfiltered", lambda: page.row_for("/echo") is not None or page.row_for("/data.json") is not None)

    # 3d. HTTP/2 rows (read from a HAR here: the store is what the page reads): the list's h2 chip,
    #     the trailers after the body, the stream and the connection's other streams.
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    def h2_entry(path, stream, trailers):
        response = {"status": 200, "statusText": "", "httpVersion": "http/2.0", "headers": [{"name": "content-type", "value": "application/grpc"}],
                    "content": {"size": 0, "mimeType": "application/grpc"}}
        if trailers:
            response["_trailers"] = trailers
        return {"startedDateTime": now, "time": 5, "connection": "c9", "_streamId": stream, "response": response,
                "request": {"method": "POST", "url": "https://grpc.example.com" + path, "httpVersion": "http/2.0",
                            "headers": [{"name": "content-type", "value": "application/grpc"}]}}
    har = {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": [
        h2_entry("/helloworld.Greeter/SayHello", 1, [{"name": "grpc-status", "value": "0"}, {"name": "grpc-message", "value": "fine"}]),
        h2_entry("/helloworld.Greeter/SayBye", 3, None)]}}
    token = url.split("token=")[1]
    request = urllib.request.Request(home + "api/har?name=h2.har", data=json.dumps(har).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    imported = json.loads(urllib.request.urlopen(request, timeout=30).read()).get("imported")
    page.set_filter("~proto h2 & ~grpc")
    listed = page.wait("the HTTP/2 rows", lambda: sorted(p.rsplit("/", 1)[-1] for p in page.row_paths()) == ["SayBye", "SayHello"], 10)
    chips = [stable(lambda: page.row_for(p).find_element(By.CSS_SELECTOR, ".chip.h2").get_attribute("title")) for p in ("SayHello", "SayBye")] if listed else []
    check(imported == 2 and listed and chips == ["HTTP/2, stream 1 on connection c9", "HTTP/2, stream 3 on connection c9"],
          "~proto h2 & ~grpc lists the HTTP/2 gRPC rows, each with an h2 chip naming its stream: %s %s" % (page.row_paths(), chips))
    page.row_for("SayHello").click()
    page.wait("detail", lambda: page.find("#detail").is_displayed())
    page.find("[data-tab=response]").click()
    trailers = page.wait("the trailers", lambda: "grpc-status" in page.find("#tab-body").text and page.find("[data-test=trailers-response]").is_displayed())
    text = page.find("#tab-body").text
    check(trailers and text.index("Trailers") > text.index("Body") and "HTTP/2.0 200" in text,
          "the response tab shows the status line as HTTP/2.0 and the trailers after the body: %r" % text[-200:])
    page.shot("h2-trailers")
    page.find("[data-tab=connection]").click()
    page.wait("the connection tab", lambda: "HTTP/2 stream" in page.find("#tab-body").text)
    connection = page.find("#tab-body").text
    check("HTTP/2 stream\n1" in connection.replace(" \n", "\n") or "HTTP/2 stream 1" in connection, "the connection tab names the stream: %r" % connection[:300])
    siblings = page.all("[data-test=same-connection] a")
    check(len(siblings) == 1 and "SayBye" in page.find("[data-test=same-connection]").text and "stream 3" in page.find("[data-test=same-connection]").text,
          "the connection tab lists the connection's other stream: %r" % (page.find("[data-test=same-connection]").text if siblings else connection[-200:]))
    page.shot("h2-connection")
    help_text = page.find("#filter-help-rows").get_attribute("textContent")
    check("~proto h2" in help_text and "~grpc" in help_text, "the filter help lists ~proto and ~grpc")
    page.set_filter("")
    page.wait("unfiltered", lambda: page.row_for("/data.json") is not None)

    # 4. A held request, edited in the page: the origin receives the edit.
    held = subprocess.Popen(["curl", "-s", "-x", appliance.proxy(), "--max-time", "60", "-H", "Content-Type: text/plain", "--data-binary", "original body", base + "/hold/1"],
                            stdout=subprocess.PIPE, text=True)
    check(page.wait("held", lambda: page.find("#held-count").text.strip() == "1", 10), "the held request is counted in the toolbar")
    page.find("#held-button").click()
    page.wait("the held message", lambda: not page.find("#held-raw").get_property("disabled") and "original body" in page.find("#held-raw").get_property("value"), 10)
    # The panel counts down to when the held message goes on by itself (breakpoints.timeout_seconds 60).
    countdown = lambda: [e.text for e in page.all("#held-panel .hi-expires")]
    first = page.wait("the countdown", lambda: any(t.startswith("sent on in ") for t in countdown()), 5) and countdown()[0]
    ticked = first and page.wait("it ticks", lambda: countdown() and countdown()[0] != first, 4)
    check(bool(first) and ticked and ("1 min" in first or any(("%d s" % n) in first for n in range(50, 61))),
          "the held panel counts down to when the message goes on by itself: %r, then %r" % (first, countdown()[:1]))
    raw = page.find("#held-raw")
    text = raw.get_property("value").replace("original body", "edited in the page")
    page.d.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", raw, text)
    page.shot("held-edit")
    page.find("#held-continue").click()
    out, _ = held.communicate(timeout=30)
    check(out == "got edited in the page" and RECEIVED[-1] == ("/hold/1", b"edited in the page"),
          "continued with the page's edit: the origin received it (%r)" % (RECEIVED[-1:],))
    page.d.execute_script("document.getElementById('held-panel').close()")

    # 5. Resend: the new exchange appears, linked to its origin.
    curl(appliance, base + "/echo", "--data-binary", "resend me")
    page.wait("the echo row", lambda: page.row_for("/echo") is not None)
    page.row_for("/echo").click()
    origin_id = page.row_for("/echo").get_attribute("data-id")
    page.wait("the resend button", lambda: page.find("#resend-as-is").is_displayed())
    page.find("#resend-as-is").click()
    check(page.wait("the linked row", lambda: any(c.get_attribute("data-origin") == origin_id for c in page.all("#list-body .chip.resent")), 10),
          "a resend appears in the list linked to exchange %s" % origin_id)
    check(len([b for p, b in RECEIVED if p == "/echo"]) == 2, "the origin received the resent request")
    page.shot("resend")

    # 5b. Import cURL: a pasted command fills the composer; an option it cannot take is refused by name.
    page.find("#compose").click()
    page.wait("the composer", lambda: page.find("#compose-dialog").is_displayed())
    page.find("#curl-import summary").click()
    box = page.find("[data-test=curl-text]")
    box.send_keys("curl -sS --form a=1 '%s/pasted'" % base)
    page.find("[data-test=curl-apply]").click()
    refused = page.wait("the refusal", lambda: page.find("#compose-error").is_displayed() and "--form" in page.find("#compose-error").text, 5)
    check(refused, "a pasted curl with an option the import cannot take is refused by name: %r" % page.find("#compose-error").text)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys("curl '%s/pasted?x=1' -H 'X-Pasted: yes' --data-raw $'line 1\\nit\\'s pasted' --compressed" % base)
    page.find("[data-test=curl-apply]").click()
    filled = page.wait("the form filled", lambda: page.find("[data-test=req-url]").get_attribute("value") == base + "/pasted?x=1"
                       and page.find("[data-test=req-method]").get_attribute("value") == "POST"
                       and page.find("[data-test=req-body]").get_attribute("value") == "line 1\nit's pasted", 5)
    check(filled, "Import cURL fills the method, URL, headers and body: %r %r" % (page.find("[data-test=req-url]").get_attribute("value"), page.find("[data-test=req-body]").get_attribute("value")))
    page.shot("compose-curl")
    page.find("[data-test=send-request]").click()
    sent = page.wait("the pasted row", lambda: page.row_for("/pasted") is not None, 10)
    got = [b for p, b in RECEIVED if p.startswith("/pasted")]
    check(sent and got == [b"line 1\nit's pasted"], "sent, it reaches the origin and the list: %r" % got)

    # 6. A rule added in the page takes effect on the next request.
    page.find("[data-view=settings]").click()
    page.wait("the rule form", lambda: page.find("#rule-form").is_displayed())
    form = page.find("#rule-form")
    form.find_element(By.NAME, "name").send_keys("teapot")
    form.find_element(By.NAME, "match").send_keys("127.0.0.1:%d/teapot*" % origin)
    page.d.execute_script("const s = arguments[0]; s.value = 'block'; s.dispatchEvent(new Event('change'));", form.find_element(By.NAME, "action"))
    status = form.find_element(By.NAME, "status")
    page.wait("the status field", lambda: status.is_displayed())
    status.send_keys("418")
    page.find("#rule-save").click()
    applied = page.wait("the rule", lambda: "teapot" in json.dumps(settings_rules(appliance)), 10)
    page.shot("rule")
    codes = []
    wait_until("the rule is applied", lambda: codes.append(curl(appliance, base + "/teapot/1")) or codes[-1] == "418", 10) if applied else None
    check(applied and codes and codes[-1] == "418", "a rule added in the page answers the next curl (%s)" % codes)
    check("future_key" in open(os.path.join(appliance.group, "settings.json")).read(), "settings.json keeps the keys the page does not know")

    # 6b. Header edits as a form: set one header and remove another, no JSON typed.
    form = page.find("#rule-form")
    form.find_element(By.NAME, "name").send_keys("tagger")
    form.find_element(By.NAME, "match").send_keys("127.0.0.1:%d/hdr*" % origin)
    page.d.execute_script("const s = arguments[0]; s.value = 'headers'; s.dispatchEvent(new Event('change'));", form.find_element(By.NAME, "action"))
    page.wait("the header form", lambda: page.find("[data-test=he-add-request]").is_displayed())
    page.find("[data-test=he-add-request]").click()
    page.find("[data-test=he-add-request]").click()
    rows = page.all("[data-test=header-editor-request] .he-row")
    rows[0].find_element(By.CSS_SELECTOR, ".he-name").send_keys("X-From-Page")
    rows[0].find_element(By.CSS_SELECTOR, ".he-value").send_keys("yes")
    page.d.execute_script("const s = arguments[0]; s.value = 'remove'; s.dispatchEvent(new Event('change'));", rows[1].find_element(By.CSS_SELECTOR, ".he-op"))
    rows[1].find_element(By.CSS_SELECTOR, ".he-name").send_keys("User-Agent")
    page.shot("rule-headers")
    page.find("#rule-save").click()
    saved = page.wait("the header rule", lambda: any(r.get("name") == "tagger" for r in settings_rules(appliance)), 10)
    rule = next((r for r in settings_rules(appliance) if r.get("name") == "tagger"), {})
    echoed = []
    wait_until("the header rule applies", lambda: echoed.append(subprocess.run(["curl", "-s", "-x", appliance.proxy(), base + "/hdr"], capture_output=True, text=True).stdout)
               or "X-From-Page: yes" in echoed[-1], 10) if saved else None
    check(saved and rule.get("request") == {"remove": ["User-Agent"], "set": {"X-From-Page": "yes"}}
          and echoed and "X-From-Page: yes" in echoed[-1] and "User-Agent" not in echoed[-1],
          "a header rule made with the form (no JSON typed) sets and removes request headers: %s; the origin got %r" % (rule.get("request"), echoed[-1:]))

    # 6d. A rule matched with a filter: refused with the filter's position when it cannot
    #     work, in force on the next request when it can, and the Test box takes a method.
    form = page.find("#rule-form")
    form.find_element(By.NAME, "name").send_keys("posts-only")
    match = form.find_element(By.NAME, "match")
    match.send_keys("~m POST & ~c 4x5")
    page.d.execute_script("const s = arguments[0]; s.value = 'block'; s.dispatchEvent(new Event('change'));", form.find_element(By.NAME, "action"))
    status = form.find_element(By.NAME, "status")
    page.wait("the status field", lambda: status.is_displayed())
    status.send_keys("409")
    page.find("#rule-save").click()
    said = page.wait("the form's error", lambda: "position 14" in form.text, 10)
    check(said and not any(r.get("name") == "posts-only" for r in settings_rules(appliance)),
          "a rule whose filter is invalid is refused in the form with its position: %r" % form.text[-200:])
    match.clear()
    match.send_keys("~m POST & ~u /filtered")
    page.find("#rule-save").click()
    saved = page.wait("the filter rule", lambda: any(r.get("match") == "~m POST & ~u /filtered" for r in settings_rules(appliance)), 10)
    codes = []
    wait_until("the filter rule applies", lambda: codes.append(curl(appliance, base + "/filtered", "-d", "x=1")) or codes[-1] == "409", 10) if saved else None
    check(saved and codes and codes[-1] == "409" and curl(appliance, base + "/filtered") == "200",
          "a rule with a filter added in the page blocks the POST and lets the GET through (%s)" % codes)
    test_url = page.find("[data-test=rule-test-url]")
    test_url.send_keys(base + "/filtered")
    page.d.execute_script("const s = arguments[0]; s.value = 'POST'; s.dispatchEvent(new Event('change'));", page.find("[data-test=rule-test-method]"))
    page.find("[data-test=rule-test]").click()
    tested_post = page.wait("the POST test", lambda: "posts-only" in page.find("[data-test=rule-test-result]").text, 10)
    page.shot("rule-filter")
    page.d.execute_script("const s = arguments[0]; s.value = 'GET'; s.dispatchEvent(new Event('change'));", page.find("[data-test=rule-test-method]"))
    page.find("[data-test=rule-test]").click()
    tested_get = page.wait("the GET test", lambda: "No rule matches" in page.find("[data-test=rule-test-result]").text, 10)
    check(tested_post and tested_get, "the page's rule test applies the filter rule to a POST and not to a GET")

    # 6c. The SSL card edits pin_loopback and upstream_trust.
    card = page.find("#ssl-proxying")
    card.find_element(By.CSS_SELECTOR, "[data-test=ssl-pin-loopback]").click()
    card.find_element(By.CSS_SELECTOR, "[data-test=ssl-upstream-trust]").send_keys("/etc/ssl/certs/ca-certificates.crt")
    card.find_element(By.CSS_SELECTOR, ".card-foot .btn.primary").click()
    def ssl_part():
        try:
            return json.load(open(os.path.join(appliance.group, "settings.json"))).get("ssl_proxying", {})
        except ValueError:
            return {}
    check(page.wait("ssl saved", lambda: ssl_part().get("pin_loopback") is True and ssl_part().get("upstream_trust") == "/etc/ssl/certs/ca-certificates.crt", 10),
          "the SSL card writes pin_loopback and upstream_trust: %s" % {k: ssl_part().get(k) for k in ("pin_loopback", "upstream_trust")})

    # 7. Status: the readiness card, the network and the devices.
    page.find("[data-view=status]").click()
    page.wait("the card", lambda: page.find("#readiness").is_displayed() and "ready" in page.find("#readiness").text, 10)
    check(page.wait("the network card", lambda: page.find("[data-test=live-mode]").text == "proxy" and page.find("[data-test=network-rules]").text == "off"),
          "the status view's Network card shows the live mode and the rules: %r" % page.find("#network-card").text.replace("\n", " · ")[:200])
    page.shot("status")

    # 7b. A stray comma in settings.json: the page shows the settings in force, the error
    #     with its line and column, and one readiness in the Traffic and Status views.
    settings_path = os.path.join(appliance.group, "settings.json")
    good_text = open(settings_path).read()
    with open(settings_path, "w") as f:
        f.write(good_text.rstrip().rstrip("}").rstrip() + ",\n}\n")
    wait_until("the tunnel reports the bad file", lambda: appliance.status()["settings"]["valid"] is False, 10)
    error = appliance.status()["settings"]["error"]
    line, column = error.split(":")[0], error.split(":")[1]
    page.d.refresh()
    page.wait("live", lambda: page.find("#live-state").text.strip() == "live", 15)
    banner_text = lambda: "".join(e.text for e in page.all("#settings-banner") if e.is_displayed())
    check(page.wait("the banner", lambda: "line %s, column %s" % (line, column) in banner_text(), 10),
          "on load, a banner says settings.json is invalid with its line and column (%s:%s): %r" % (line, column, stable(banner_text)[:200]))
    page.find("[data-view=settings]").click()
    page.wait("the settings", lambda: page.find("#ssl-proxying").is_displayed(), 10)
    include = stable(lambda: page.find("[data-test=ssl-include]").text)
    rules = stable(lambda: page.find("#rules").text)
    check("secure.example.com" in include and "teapot" in rules,
          "the Settings view still lists the SSL-proxying host and the rule in force: include %r, rules %r" % (include[:80], rules[:120]))
    check(curl(appliance, base + "/teapot/2") == "418", "the last good settings are still in force (the teapot rule answers)")
    page.shot("settings-broken")
    page.find("[data-view=traffic]").click()
    bar = stable(lambda: (page.find("#sb-tunnel").get_attribute("data-state"), page.find("#sb-tunnel").text.strip()))
    page.find("[data-view=status]").click()
    page.wait("the card", lambda: page.find("#readiness").is_displayed(), 10)
    card = stable(lambda: (page.find("#readiness").get_attribute("data-state"), page.find("#readiness .rh-title").text.strip()))
    check(bar[0] == card[0] and bar[1] == card[1] and card[0] == "amber",
          "Traffic and Status agree on readiness (ready, with a warning): status bar %r, Status view %r" % (bar, card))
    page.shot("status-broken")
    with open(settings_path, "w") as f:
        f.write(good_text)
    wait_until("the tunnel takes the fixed file", lambda: appliance.status()["settings"]["valid"] is True, 10)
    check(page.wait("the banner goes", lambda: banner_text() == "", 10), "the banner goes once the file is fixed")

    # 8. HAR export downloads a file that validates.
    page.find("[data-view=traffic]").click()
    page.find("#sessions-button").click()
    page.find("#export-har").click()
    har = []
    wait_until("the download", lambda: har.extend(f for f in os.listdir(downloads) if f.endswith(".har")) or har, 15)
    path = os.path.join(downloads, har[0])
    valid = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "har", "validate.py"), path], capture_output=True, text=True)
    entries = json.load(open(path))["log"]["entries"]
    check(valid.returncode == 0 and any("/data.json" in e["request"]["url"] for e in entries), "the HAR export downloads and validates (%d entries) %s" % (len(entries), valid.stdout[:300]))
    page.shot("har")

    # 9. Devices: laptop is listed online with its traffic, goes offline without a reload
    #    once idle, and a click filters the list to it.
    page.d.execute_script("window.notReloaded = true")
    code = curl(appliance, base + "/device/laptop")
    stable(lambda: page.find("[data-view=devices]").click())
    laptop = lambda: page.find("#view-devices .device-row[data-device='laptop']")
    cell = lambda css: laptop().find_element(By.CSS_SELECTOR, css).text.strip()
    online = page.wait("laptop online", lambda: laptop().get_attribute("data-online") == "true" and cell(".dv-source") == "proxy"
                       and int(cell(".dv-today").replace(",", "")) >= 1, 10)
    check(code == "200" and online, "the Devices view lists laptop online, source %r, %s exchanges today (readiness: %s)"
          % stable(lambda: (cell(".dv-source"), cell(".dv-today"),
                            ", ".join(s.get_attribute("data-step") + "=" + s.get_attribute("data-ok") for s in laptop().find_elements(By.CSS_SELECTOR, ".step")))))
    page.shot("devices")
    idle_from = time.time()
    offline = page.wait("laptop offline", lambda: laptop().get_attribute("data-online") == "false", IDLE_SECONDS + 8)
    check(offline and page.d.execute_script("return window.notReloaded === true"),
          "laptop shows offline %.1f s after its last request (idle_seconds %d), without a reload" % (time.time() - idle_from, IDLE_SECONDS))
    page.shot("devices-offline")
    stable(lambda: laptop().click())
    devices = lambda: stable(lambda: [e.text for e in page.all("#list-body .row[data-id] .c-device")])
    filtered = page.wait("the device's rows", lambda: page.find("#view-traffic").is_displayed() and page.find("#filter").get_attribute("value") == "~device laptop"
                         and page.row_for("/device/laptop") is not None and set(devices()) == {"laptop"}, 10)
    check(filtered, "clicking laptop shows the list filtered to ~device laptop, its request there (%d rows, devices %s)" % (len(devices()), sorted(set(devices()))))
    page.shot("device-filter")

    # 10. Enrol a device from the Devices view: the link and its QR code, shown once; the "device" (curl) opens it.
    stable(lambda: page.find("[data-view=devices]").click())
    page.find("[data-test=enrol-name]").send_keys("pixel")
    page.find("[data-test=enrol-add]").click()
    shown = page.wait("the link", lambda: "/enrol/" in page.find("[data-test=enrol-link]").text, 10)
    link = page.find("[data-test=enrol-link]").text if shown else ""
    qr = page.find("[data-test=enrol-qr]") if shown else None
    drawn = qr is not None and page.d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", qr)
    onboarding = (appliance.status().get("web") or {}).get("onboarding") or {}
    check(shown and link.startswith("http://%s/enrol/" % onboarding.get("bound")) and drawn,
          "Add and get a link shows pixel's enrolment link on the onboarding listener (%s) and its QR code: %r, QR drawn %s" % (onboarding.get("bound"), link[:60], drawn))
    page.shot("devices-enrol")
    decoded = None
    if drawn and shutil.which("zbarimg"):
        png = os.path.join(downloads, "enrol-qr.png")
        with open(png, "wb") as f:
            f.write(qr.screenshot_as_png)
        z = subprocess.run(["zbarimg", "--quiet", "--raw", png], capture_output=True, text=True, timeout=20)
        decoded = z.stdout.strip()
        check(decoded == link, "the QR code, read by zbarimg from the page, is the link: %r" % decoded[:80])
    confirm = subprocess.run(["curl", "-sS", "--noproxy", "*", link], capture_output=True, timeout=20)
    opened = subprocess.run(["curl", "-sS", "--noproxy", "*", "-d", "", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", link], capture_output=True, text=True, timeout=20)
    check(b"<form method=post" in confirm.stdout and opened.stdout.startswith("303 ") and opened.stdout.endswith("/device/pixel"),
          "the device opens it, confirms, and is sent to its page: %r" % opened.stdout)
    pixel = lambda: page.find("#view-devices .device-row[data-device='pixel']")
    enrolled = page.wait("pixel enrolled", lambda: pixel().find_element(By.CSS_SELECTOR, "[data-step=enrolled]").get_attribute("data-ok") == "true"
                         and pixel().find_element(By.CSS_SELECTOR, "[data-step=admitted]").get_attribute("data-ok") == "true", 10)
    check(enrolled, "its row turns enrolled and admitted live")
    laptop_revoke = page.find("#view-devices .device-row[data-device='laptop'] [data-test=device-revoke]")
    check(pixel().find_element(By.CSS_SELECTOR, "[data-test=device-revoke]").is_displayed() and not laptop_revoke.is_displayed(),
          "Revoke is offered for pixel's link, not for laptop (no link)")
    page.shot("devices-enrolled")

    # 11. Deep links survive the login: the route replays once the gate opens.
    first = next((r for r in json.loads(appliance.cli("list", "--json", "--limit", "500").stdout) if r.get("url", "").endswith("/live/first")), {})
    check(str(first.get("link", "")).startswith(home + "#/exchange/") , "list --json rows carry their deep link: %r" % first.get("link"))
    deep = appliance.cli("web", "url", "--exchange", str(first.get("id"))).stdout.strip()
    check(deep.endswith("#/exchange/%s" % first.get("id")) and "/login?token=" in deep, "busymate web url --exchange ID: %s" % deep.split("token=")[0] + "token=…#" + deep.split("#")[-1])
    page.d.delete_all_cookies()
    page.d.get("about:blank")
    page.d.get(first.get("link") or home)
    at_login = page.wait("the login", lambda: "/login" in page.d.current_url and page.find("#token").is_displayed(), 10)
    token = url.split("token=")[1]
    page.find("#token").send_keys(token + Keys.ENTER)
    opened = page.wait("its detail", lambda: page.find("#detail").is_displayed() and "/live/first" in page.find("#detail .d-url").text, 15)
    check(at_login and opened, "a deep link to exchange %s, opened signed out, goes through the login and then opens its detail" % first.get("id"))
    page.shot("deep-link-exchange")
    page.d.delete_all_cookies()
    page.d.get("about:blank")
    page.d.get(deep)
    opened = page.wait("its detail", lambda: page.find("#detail").is_displayed() and "/live/first" in page.find("#detail .d-url").text, 15)
    check(opened, "busymate web url --exchange's link, opened signed out, signs in and opens the detail")
    page.d.get(home + "#/device/pixel")
    marked = page.wait("pixel marked", lambda: page.find("#view-devices").is_displayed() and "focused" in (pixel().get_attribute("class") or ""), 10)
    check(marked, "#/device/pixel opens the Devices view with pixel's row marked")
    page.shot("deep-link-device")

    errors = page.errors()
    check(not errors, "no errors in the browser console: %s" % errors[:3])


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--shots", default=os.path.join(os.getcwd(), ".build", "web-shots"))
    ARGS = parser.parse_args()
    if os.geteuid() != 0:
        print("web test: skipped (needs root: the children drop to user busymate)")
        return 0
    shutil.rmtree(ARGS.shots, ignore_errors=True)
    os.makedirs(ARGS.shots)
    base = tempfile.mkdtemp(prefix="bmweb-", dir="/tmp")
    downloads = os.path.join(base, "downloads")
    os.makedirs(downloads)
    origin = start_origin()
    appliance = Appliance(base, origin)
    # A key this version does not know: the page's edits must keep it.
    settings_path = os.path.join(appliance.group, "settings.json")
    document = json.load(open(settings_path))
    document["future_key"] = {"kept": True}
    with open(settings_path, "w") as f:
        json.dump(document, f, indent=2)
    driver = None
    try:
        driver = browser(downloads)
        run(appliance, origin, Page(driver), downloads)
    except Exception as error:
        check(False, "the run stopped: %r" % (error,))
        if driver:
            Page(driver).shot("failure")
    finally:
        if driver:
            driver.quit()
        appliance.stop()
        if FAILED:
            print("supervisor log: " + os.path.join(base, "supervisor.log"))
        else:
            shutil.rmtree(base, ignore_errors=True)
    print("web: %d passed, %d failed" % (len(PASSED), len(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
