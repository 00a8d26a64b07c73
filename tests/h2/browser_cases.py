"""Chromium loading an HTTP/2 page, direct and through Busymate: the same
page, the same scripts run, HTTP/2 on both paths, and the rows one HTTP/2
connection's streams."""
import shutil

from harness import check


def chromium(proxy_port=None):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    # The origin's test CA and Busymate's are not in Chromium's store: both paths alike skip the check.
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--ignore-certificate-errors"]
    if proxy_port:
        # Chromium never proxies loopback unless told: <-loopback> takes that exception away.
        flags += ["--proxy-server=http://127.0.0.1:%d" % proxy_port, "--proxy-bypass-list=<-loopback>"]
    else:
        flags += ["--no-proxy-server"]
    for flag in flags:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)


def load(driver, url):
    driver.set_page_load_timeout(30)
    driver.get(url)
    return {
        "title": driver.title,
        "loaded": driver.execute_script("return window.loaded || 0"),
        "protocols": driver.execute_script(
            "return [performance.getEntriesByType('navigation')[0].nextHopProtocol]"
            ".concat(performance.getEntriesByType('resource').map(e => e.nextHopProtocol))"),
        "origin_saw": driver.find_element("id", "done").text,
    }


def chromium_page(w):
    """The same HTTP/2 page in Chromium direct and through Busymate."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        check(False, "selenium is installed (scripts/install-deps.sh --test)")
        return
    seen = {}
    for how, port in (("direct", None), ("through Busymate", w.proxy)):
        driver = chromium(port)
        try:
            seen[how] = load(driver, w.url("main_tls", "/page?case=chromium-%s" % ("direct" if port is None else "proxy")))
        finally:
            driver.quit()
    direct, proxied = seen["direct"], seen["through Busymate"]
    check(direct["title"] == "h2 page" and direct["loaded"] == 10, "direct: the page and its ten scripts load", direct)
    check(proxied["title"] == direct["title"] and proxied["loaded"] == direct["loaded"], "through Busymate: the same page, the same scripts run", proxied)
    check(set(direct["protocols"]) == {"h2"}, "direct: Chromium speaks HTTP/2 to the origin", direct["protocols"])
    check(set(proxied["protocols"]) == {"h2"}, "through Busymate: Chromium speaks HTTP/2 (to Busymate's interception)", proxied["protocols"])
    check(proxied["origin_saw"] == "2", "through Busymate: the origin was reached over HTTP/2 too", proxied["origin_saw"])
    rows = w.busymate.rows("~u case=chromium-proxy", expect=11)
    check(len(rows) == 11, "the page and its ten scripts are 11 rows", len(rows))
    check(all(r.get("http_version") == "HTTP/2.0" and r.get("status") == 200 for r in rows), "each row is an HTTP/2.0 200",
          [(r.get("http_version"), r.get("status")) for r in rows])
    check(len({r.get("connection_id") for r in rows}) == 1, "all on one client connection (one connection id, its streams)",
          sorted({r.get("connection_id") for r in rows}, key=str))


CASES = [("chromium_h2_page", chromium_page)]
