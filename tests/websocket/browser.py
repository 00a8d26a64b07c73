"""Chromium opens a WebSocket through Busymate (a page on the origin, the
browser's proxy set to Busymate), and a second Chromium shows Busymate's page:
the socket's row, then its Messages tab growing while the socket is open."""
import os, shutil, sys, time

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h2"))
from harness import check  # noqa: E402


def chromium(proxy_port=None):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1440,900"]
    flags += ["--proxy-server=http://127.0.0.1:%d" % proxy_port, "--proxy-bypass-list=<-loopback>"] if proxy_port else ["--no-proxy-server"]
    for flag in flags:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)


def wait(driver, predicate, timeout=15):
    try:
        WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
            lambda d: predicate())
        return True
    except TimeoutException:
        return False


def chromium_live(w):
    if not (shutil.which("chromium") and (shutil.which("chromedriver") or os.path.exists("/usr/bin/chromedriver"))):
        check(False, "chromium and chromedriver are installed (scripts/install-deps.sh --test)")
        return
    client, viewer = chromium(w.proxy), chromium()
    try:
        client.get("http://localhost:%d/page" % w.origins["plain"])
        check(wait(client, lambda: client.find_element(By.ID, "state").text == "open"), "Chromium opened a WebSocket through Busymate")
        check(wait(client, lambda: int(client.find_element(By.ID, "echoes").text) >= 2), "its messages are echoed back through Busymate")
        url = w.busymate.cli("web", "url").stdout.strip()
        viewer.get(url)
        check(wait(viewer, lambda: viewer.find_element(By.ID, "live-state").text.strip() == "live"), "Busymate's page is live")
        box = viewer.find_element(By.ID, "filter")
        box.send_keys("~websocket & ~u case=chromium" + Keys.ENTER)
        row = lambda: viewer.find_element(By.CSS_SELECTOR, "#list-body .row[data-id]")
        check(wait(viewer, lambda: row().find_element(By.CSS_SELECTOR, ".c-type").text == "ws"), "the socket's row is in the list, typed ws")
        row().click()
        tab = lambda: viewer.find_element(By.CSS_SELECTOR, ".tab[data-tab=messages]")
        check(wait(viewer, lambda: tab().is_displayed()), "its detail has a Messages tab")
        tab().click()
        count = lambda: len(viewer.find_elements(By.CSS_SELECTOR, "[data-test=message]"))
        check(wait(viewer, lambda: count() >= 4), "the tab lists the messages", count())
        first = count()
        check(wait(viewer, lambda: count() >= first + 4, 10), "new messages appear while the socket is open (live)", (first, count()))
        texts = [e.text for e in viewer.find_elements(By.CSS_SELECTOR, "[data-test=message] [data-test=message-text]")]
        check(any('"from":"chromium"' in t for t in texts), "the messages show their text", texts[:3])
        # The filter box keeps the messages that match, the direction select one way only.
        box = viewer.find_element(By.CSS_SELECTOR, "[data-test=messages-filter]")
        box.send_keys('"tick":3,')
        visible = lambda: [e for e in viewer.find_elements(By.CSS_SELECTOR, "[data-test=message]") if e.is_displayed()]
        check(wait(viewer, lambda: len(visible()) == 2), "the filter keeps tick 3 and its echo", len(visible()))
        viewer.find_element(By.CSS_SELECTOR, "[data-test=messages-direction] option[value=server]").click()
        check(wait(viewer, lambda: len(visible()) == 1 and visible()[0].find_element(By.CSS_SELECTOR, ".msg-arrow").text == "←"),
              "one way only: the server's echo", len(visible()))
        visible()[0].click()
        check(wait(viewer, lambda: viewer.find_element(By.CSS_SELECTOR, "[data-test=message-full] .json-tree").is_displayed()),
              "a JSON message opens as a tree")
        viewer.save_screenshot(os.path.join(w.base, "messages-tab.png"))
        # The composer: a message of one's own to the server, echoed back to the page in Chromium.
        viewer.find_element(By.CSS_SELECTOR, "[data-test=compose-text]").send_keys('{"from":"the composer"}')
        viewer.find_element(By.CSS_SELECTOR, "[data-test=compose-send]").click()
        box.clear()
        viewer.find_element(By.CSS_SELECTOR, "[data-test=messages-direction] option[value='']").click()
        injected = lambda: [e for e in viewer.find_elements(By.CSS_SELECTOR, "[data-test=message]")
                            if "injected" in e.find_element(By.CSS_SELECTOR, ".msg-kind").text]
        check(wait(viewer, lambda: len(injected()) == 1 and "the composer" in injected()[0].text), "the composer's message is in the tab, marked injected",
              [e.text for e in injected()])
        echoed = lambda: [e for e in viewer.find_elements(By.CSS_SELECTOR, "[data-test=message]")
                          if "the composer" in e.text and e.find_element(By.CSS_SELECTOR, ".msg-arrow").text == "←"]
        check(wait(viewer, lambda: len(echoed()) == 1), "the server echoed it back to Chromium")
        errors = [e for e in viewer.get_log("browser") if e.get("level") == "SEVERE" and e.get("source") != "network"]
        check(not errors, "no script errors or CSP violations on Busymate's page", errors[:3])
    finally:
        client.quit()
        viewer.quit()


def page_held(w, open_socket, applied):
    """A held WebSocket message edited in the page's held panel reaches the server byte for byte (no HTTP line ends added)."""
    if not (shutil.which("chromium") and (shutil.which("chromedriver") or os.path.exists("/usr/bin/chromedriver"))):
        check(False, "chromium and chromedriver are installed (scripts/install-deps.sh --test)")
        return
    r = w.busymate.cli("breakpoints", "add", "messages", "*/held-by-page*", "--from", "client")
    check(r.returncode == 0, "a message breakpoint is set", r.stderr)
    applied(w)
    viewer = chromium()
    try:
        viewer.get(w.busymate.cli("web", "url").stdout.strip())
        check(wait(viewer, lambda: viewer.find_element(By.ID, "live-state").text.strip() == "live"), "Busymate's page is live")
        # Uncompressed: a compressed message whose sender keeps its window can only go on as it came.
        with open_socket(w, "/held-by-page?case=page_held", deflate=False) as ws:
            ws.send("line one\nline two")
            check(wait(viewer, lambda: viewer.find_element(By.ID, "held-count").text.strip() == "1"), "the page counts the held message")
            viewer.find_element(By.ID, "held-button").click()
            item = lambda: viewer.find_element(By.CSS_SELECTOR, "#held-list [data-held-id]")
            check(wait(viewer, lambda: "message_from_client" in item().text.lower()), "the held panel lists it as a client's message", item().text)
            item().click()
            raw = lambda: viewer.find_element(By.ID, "held-raw")
            check(wait(viewer, lambda: raw().get_attribute("value") == "line one\nline two"), "its payload is in the editor, as sent",
                  raw().get_attribute("value"))
            raw().clear()
            raw().send_keys("edited\nsecond line")
            viewer.find_element(By.ID, "held-continue").click()
            try:
                echoed = ws.recv(timeout=10)
            except TimeoutError:
                echoed = None
            events = w.busymate.cli("breakpoints", "list", "--all", "--json").stdout
            check(echoed == "edited\nsecond line", "the edit reaches the server (and its echo the client) byte for byte",
                  (echoed, viewer.find_element(By.ID, "held-error").text, events[-600:]))
    finally:
        viewer.quit()
        w.busymate.cli("breakpoints", "remove", "messages", "*/held-by-page*")
        applied(w)
