#!/usr/bin/env python3
"""A real browser's page load: the benchmark cell busymate-bench runs.

  pageload.py make-page DIR
      Writes index.html, 120 PNG images (img/N.png) and 20 scripts (js/N.js)
      into DIR, about 900 KB in all, byte for byte the same on every run.
      Prints {"resources": 140, "bytes": N} (N: the 140 files plus index.html).

  pageload.py load --url URL [--proxy HOST:PORT] [--loads 7] [--timeout 60]
                   [--settle 1] [--resources 140]
      Loads URL in headless Chromium --loads times, each in a fresh browser
      with a fresh profile (no HTTP cache, connection or TLS session carried
      from one load to the next), after one discarded warm-up load. Prints
      {"loads_ms": [...], "median_ms": x, "protocols": [...], "resources": 140,
      "failed": 0}: a load's time is its navigation entry's loadEventEnd
      (milliseconds from the navigation's start), the protocols are the
      nextHopProtocol values of the navigation and of every resource.
      A load that fails or misses a resource stops the run: the JSON then
      has "failed": 1 and "error", the reason goes to stderr, the exit is 1.

Needs selenium 4, /usr/bin/chromium and /usr/bin/chromedriver; the page must
be served with its MIME types (text/html for index.html). The caller pins
cores (taskset); this script pins nothing.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zlib

IMAGES = 120
SCRIPTS = 20
# A fixed seed: the page is the same bytes on every machine and every run.
SEED = 20240611

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


# ---------------------------------------------------------------- make-page


def png(width: int, height: int, rgb_rows: list[bytes]) -> bytes:
    """A truecolour PNG, its pixels stored uncompressed (deflate level 0):
    the file's size is known in advance and its bytes do not depend on the
    zlib version."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + row for row in rgb_rows)  # filter type 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")


def make_image(rng: random.Random, target: int) -> tuple[bytes, int, int]:
    """A PNG of about `target` bytes: a colour gradient with noise."""
    width = rng.randrange(24, 65)
    # 57 bytes of PNG framing, 1 filter byte and 3 bytes a pixel per row.
    height = max(1, (target - 57) // (1 + 3 * width))
    base = [rng.randrange(256) for _ in range(3)]
    rows = []
    for y in range(height):
        noise = rng.randbytes(3 * width)
        rows.append(bytes((base[i % 3] + y + (i // 3) + noise[i] % 64) % 256 for i in range(3 * width)))
    return png(width, height, rows), width, height


def make_script(rng: random.Random, index: int, target: int) -> bytes:
    """Real JavaScript of about `target` bytes: a table of numbers it
    checksums, then the counter the load checks."""
    head = f"/* Busymate page-load benchmark, script {index}. */\n(function () {{\n  var data = [\n"
    tail = (
        "  ];\n"
        "  var sum = 0;\n"
        "  for (var i = 0; i < data.length; i++) { sum = (sum * 31 + data[i]) % 1000003; }\n"
        "  window.scriptChecksums = window.scriptChecksums || {};\n"
        f'  window.scriptChecksums["{index}"] = sum;\n'
        "  window.loadedScripts = (window.loadedScripts || 0) + 1;\n"
        "})();\n"
    )
    lines = []
    size = len(head) + len(tail)
    while size < target:
        line = "    " + ", ".join(str(rng.randrange(1_000_000)) for _ in range(10)) + ",\n"
        lines.append(line)
        size += len(line)
    return (head + "".join(lines) + tail).encode()


def make_page(directory: str) -> dict:
    rng = random.Random(SEED)
    os.makedirs(os.path.join(directory, "img"), exist_ok=True)
    os.makedirs(os.path.join(directory, "js"), exist_ok=True)
    total = 0

    def write(relative: str, data: bytes) -> None:
        nonlocal total
        with open(os.path.join(directory, relative), "wb") as f:
            f.write(data)
        total += len(data)

    # Scripts in the head with defer: found first, fetched in parallel with
    # the images, all run before DOMContentLoaded (so before load).
    script_tags = []
    for i in range(SCRIPTS):
        write(f"js/{i}.js", make_script(rng, i, rng.randrange(2048, 8193)))
        script_tags.append(f'<script src="js/{i}.js" defer></script>')
    img_tags = []
    for i in range(IMAGES):
        data, width, height = make_image(rng, rng.randrange(4096, 9217))
        write(f"img/{i}.png", data)
        img_tags.append(f'<img src="img/{i}.png" width="{width}" height="{height}" alt="image {i}">')
    html = (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<title>Busymate page-load benchmark</title>\n"
        # No /favicon.ico request: only the page's 141 requests are made.
        '<link rel="icon" href="data:,">\n'
        "<style>body { font-family: sans-serif; } img { margin: 2px; }</style>\n"
        + "\n".join(script_tags)
        + "\n</head>\n<body>\n<h1>Busymate page-load benchmark</h1>\n"
        f"<p>{IMAGES} images and {SCRIPTS} scripts.</p>\n<div>\n"
        + "\n".join(img_tags)
        + "\n</div>\n</body>\n</html>\n"
    )
    write("index.html", html.encode())
    return {"resources": IMAGES + SCRIPTS, "bytes": total}


# --------------------------------------------------------------------- load

# Run in the page once its load event has ended (or not yet: loadEventEnd 0).
COLLECT = """
const nav = performance.getEntriesByType('navigation')[0];
const resources = performance.getEntriesByType('resource');
const images = Array.from(document.images);
return {
  href: location.href,
  loadEventEnd: nav ? nav.loadEventEnd : 0,
  navigationProtocol: nav ? nav.nextHopProtocol : '',
  navigationStatus: nav && nav.responseStatus !== undefined ? nav.responseStatus : 200,
  resourceProtocols: resources.map(r => r.nextHopProtocol),
  resourceEntries: resources.length,
  images: images.length,
  imagesLoaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
  scripts: document.querySelectorAll('script[src]').length,
  scriptsRun: window.loadedScripts || 0,
};
"""


def chromium_options(profile: str, url: str, proxy: str | None):
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # The origin's certificate and the proxy's CA are not in Chromium's store.
        "--ignore-certificate-errors",
        f"--user-data-dir={profile}",
        f"--disk-cache-dir={os.path.join(profile, 'cache')}",
        "--window-size=1280,1024",
        # Fewer requests of Chromium's own (field trials, component and
        # extension updates, network time, optimisation hints, translate,
        # sync, metrics, the media router's discovery): they would share the
        # cores and the proxy with the page. --disable-field-trial-config: an
        # unbranded build otherwise turns on its testing config's experiments.
        # Network prediction stays on, as in a user's Chrome: it preconnects
        # to the page's origin as the navigation starts, so a load opens two
        # connections to it (two CONNECTs through a proxy) and uses one.
        "--disable-field-trial-config",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-component-extensions-with-background-pages",
        "--disable-breakpad",
        "--metrics-recording-only",
        "--no-first-run",
        "--no-default-browser-check",
        "--no-pings",
        "--password-store=basic",
        "--disable-features=OptimizationHints,OptimizationGuideModelDownloading,Translate,MediaRouter,"
        "DialMediaRouteProvider,NetworkTimeServiceQuerying,CertificateTransparencyComponentUpdater,"
        "AutofillServerCommunication,InterestFeedContentSuggestions,PrivacySandboxSettings4",
        # No timer or renderer throttling of a window nobody sees.
        "--disable-background-timer-throttling",
        "--disable-renderer-backgrounding",
        "--disable-backgrounding-occluded-windows",
        "--mute-audio",
    ]:
        options.add_argument(flag)
    # The flags above do not silence everything: this Chromium still asks
    # accounts.google.com (ListAccounts), update.googleapis.com (an update
    # check) and start.duckduckgo.com (the default search engine) at start-up.
    # So every host but the page's and the proxy's resolves to nothing inside
    # Chromium: no DNS query, no connection leaves the machine. Through a
    # proxy Chromium resolves no destination itself, so requests to the
    # standard ports (all of Chromium's own) bypass the proxy and meet the
    # same wall; the page, on another port, is the only traffic the proxy sees.
    hosts = {urllib.parse.urlsplit(url).hostname} | ({proxy.rsplit(":", 1)[0].strip("[]")} if proxy else set())
    excluded = "".join(f", EXCLUDE {f'[{host}]' if ':' in host else host}" for host in sorted(hosts))
    options.add_argument(f"--host-resolver-rules=MAP * ~NOTFOUND{excluded}")
    if proxy:
        # <-loopback>: Chromium never proxies loopback origins unless told.
        options.add_argument(f"--proxy-server=http://{proxy}")
        options.add_argument("--proxy-bypass-list=<-loopback>;*:80;*:443")
    else:
        options.add_argument("--no-proxy-server")
    return options


def load_once(url: str, proxy: str | None, timeout: float, settle: float, expected: int) -> dict:
    """One load in a fresh Chromium with a fresh profile, removed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="busymate-pageload-")
    driver = None
    try:
        service = Service(executable_path=CHROMEDRIVER, log_output=subprocess.DEVNULL)
        driver = webdriver.Chrome(options=chromium_options(profile, url, proxy), service=service)
        driver.set_page_load_timeout(timeout)
        driver.set_script_timeout(timeout)
        # Chromium's start-up work (its first tab, its own failed requests)
        # ends before the navigation starts rather than sharing its cores.
        time.sleep(settle)
        deadline = time.monotonic() + timeout
        driver.get(url)  # returns once document.readyState is "complete"
        # readyState turns "complete" just before the load event runs, so
        # loadEventEnd may still be 0 here.
        while True:
            page = driver.execute_script(COLLECT)
            if page["loadEventEnd"] > 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no load event within {timeout:g} s ({page['href']})")
            time.sleep(0.01)
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        shutil.rmtree(profile, ignore_errors=True)

    problems = []
    if page["navigationStatus"] not in (0, 200):
        problems.append(f"the page answered {page['navigationStatus']}")
    if page["images"] + page["scripts"] != expected:
        problems.append(f"the page has {page['images']} images and {page['scripts']} scripts, not {expected} resources")
    if page["imagesLoaded"] != page["images"]:
        problems.append(f"{page['images'] - page['imagesLoaded']} of {page['images']} images did not load")
    if page["scriptsRun"] != page["scripts"]:
        problems.append(f"{page['scriptsRun']} of {page['scripts']} scripts ran")
    if page["resourceEntries"] != expected:
        problems.append(f"{page['resourceEntries']} resources fetched, not {expected}")
    if problems:
        raise RuntimeError(f"{page['href']}: " + "; ".join(problems))
    return page


def load(args: argparse.Namespace) -> int:
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("pageload.py: selenium 4 is not installed for this python3 (pip install selenium)", file=sys.stderr)
        return 2
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            print(f"pageload.py: {path} is missing (apt-get install chromium chromium-driver)", file=sys.stderr)
            return 2

    # A caller's SIGTERM still runs the finally blocks: no browser or
    # profile is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    loads_ms: list[float] = []
    protocols: set[str] = set()
    error = None
    # The warm-up (index 0) is discarded: it warms the page cache with
    # Chromium's binary and resources, not any cache the loads use.
    for index in range(args.loads + 1):
        label = "warm-up" if index == 0 else f"load {index}"
        try:
            page = load_once(args.url, args.proxy, args.timeout, args.settle, args.resources)
        except Exception as e:  # selenium's errors, a timeout, a missing resource
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            error = f"{label} of {args.url}" + (f" through {args.proxy}" if args.proxy else "") + f" failed: {message}"
            break
        if index == 0:
            continue
        loads_ms.append(round(page["loadEventEnd"], 1))
        protocols.add(page["navigationProtocol"])
        protocols.update(page["resourceProtocols"])

    result = {
        "loads_ms": loads_ms,
        "median_ms": round(statistics.median(loads_ms), 1) if loads_ms else None,
        "protocols": sorted(protocols),
        "resources": args.resources,
        "failed": 1 if error else 0,
    }
    if error:
        result["error"] = error
        print(f"pageload.py: {error}", file=sys.stderr)
    print(json.dumps(result))
    return 1 if error else 0


def main() -> int:
    parser = argparse.ArgumentParser(description="A real browser's page load, for busymate-bench.")
    commands = parser.add_subparsers(dest="command", required=True)
    page = commands.add_parser("make-page", help="write the page (index.html, img/, js/) into DIR")
    page.add_argument("directory", metavar="DIR")
    run = commands.add_parser("load", help="time uncached loads of URL in headless Chromium")
    run.add_argument("--url", required=True)
    run.add_argument("--proxy", metavar="HOST:PORT", help="an HTTP proxy (with interception) to load through")
    run.add_argument("--loads", type=int, default=7, help="timed loads, after one discarded warm-up (default 7)")
    run.add_argument("--timeout", type=float, default=60, help="seconds one load may take (default 60)")
    run.add_argument(
        "--settle", type=float, default=1.0, help="seconds between Chromium's start and the navigation (default 1)"
    )
    run.add_argument(
        "--resources", type=int, default=IMAGES + SCRIPTS, help=f"resources the page must load (default {IMAGES + SCRIPTS})"
    )
    args = parser.parse_args()
    if args.command == "make-page":
        print(json.dumps(make_page(args.directory)))
        return 0
    if args.loads < 1:
        parser.error("--loads must be at least 1")
    parts = urllib.parse.urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        parser.error(f"--url must be an http or https URL: {args.url}")
    if args.proxy and (parts.port or {"http": 80, "https": 443}[parts.scheme]) in (80, 443):
        parser.error("through a proxy, the page must be on a port other than 80 and 443 (those bypass the proxy)")
    return load(args)


if __name__ == "__main__":
    sys.exit(main())
