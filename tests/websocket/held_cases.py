"""The WebSocket suite's cases that steer a socket: a message of one's own
sent into it (`busymate ws send`), and messages held at breakpoints
(continued, edited, dropped; from the CLI and from the page)."""
import hashlib, json, os

from cases import messages, open_socket, payload, socket_row
from harness import check, wait_until


def applied(w):
    """Waits until the tunnel runs settings.json as it is on disk now."""
    sha = hashlib.sha256(open(w.busymate.settings_path, "rb").read()).hexdigest()
    check(wait_until(lambda: w.busymate.tunnel().get("settings_sha256") == sha, 15), "the tunnel applied the edited settings.json")


def inject(w):
    """`busymate ws send`: a message of one's own to the server (echoed back) and to the client, marked injected."""
    tag = "case=inject"
    with open_socket(w, "/echo?" + tag, deflate=True) as ws:
        ws.send("first, from the client")
        ws.recv(timeout=10)
        row = socket_row(w, tag, state="open")
        r = w.busymate.cli("ws", "send", str(row["id"]), "--to", "server", "--text", "injected toward the server")
        check(r.returncode == 0 and "sent message #" in r.stdout, "ws send --to server is carried out", r.stdout + r.stderr)
        check(ws.recv(timeout=10) == "injected toward the server", "the server got it (its echo came back to the client)")
        blob = os.path.join(w.base, "blob.bin")
        with open(blob, "wb") as f:
            f.write(b"\x00\xffbinary from a file")
        r = w.busymate.cli("ws", "send", str(row["id"]), "--to", "client", "--file", blob)
        check(r.returncode == 0, "ws send --to client --file is carried out", r.stderr)
        check(ws.recv(timeout=10) == b"\x00\xffbinary from a file", "the client got the file's bytes as a binary message")
    row = socket_row(w, tag, state="closed")
    detail, _ = messages(w, row["id"]) if row else (None, None)
    listed = [(m["from"], m["origin"], payload(m)) for m in (detail or {}).get("messages", [])]
    check(("client", "injected", b"injected toward the server") in listed and ("server", "relayed", b"injected toward the server") in listed
          and ("server", "injected", b"\x00\xffbinary from a file") in listed, "the socket's messages mark what was injected", listed)
    r = w.busymate.cli("ws", "send", str(row["id"]), "--to", "server", "--text", "too late")
    check(r.returncode != 0 and "closed" in r.stderr, "a closed socket refuses a message, saying so", r.stderr)


def held_events(w):
    r = w.busymate.cli("breakpoints", "list", "--json")
    return [e for e in json.loads(r.stdout) if e["kind"].startswith("message")] if r.returncode == 0 else []


def breakpoint_messages(w):
    """Messages the client sends on a matching socket are held one at a time: continued, edited or dropped; the other way keeps flowing."""
    tag = "case=breakpoint"
    r = w.busymate.cli("breakpoints", "add", "messages", "*/held*", "--from", "client")
    check(r.returncode == 0, "breakpoints add messages PATTERN --from client", r.stderr)
    applied(w)
    try:
        with open_socket(w, "/held?" + tag, deflate=False) as ws:
            row = socket_row(w, tag, state="open")

            def held():
                return wait_until(lambda: [e for e in held_events(w) if e["request_id"] == row["request_id"]], 10)

            ws.send("one")
            first = held()
            check(first and first[0]["kind"] == "message_from_client" and first[0]["method"] == "TEXT", "the client's message is held", first)
            try:
                ws.recv(timeout=0.5)
                check(False, "nothing reaches the server while it is held")
            except TimeoutError:
                pass
            # The other direction keeps flowing.
            r = w.busymate.cli("ws", "send", str(row["id"]), "--to", "client", "--text", "meanwhile, to the client")
            check(r.returncode == 0 and ws.recv(timeout=10) == "meanwhile, to the client", "the server's direction flows while the client's waits", r.stderr)
            r = w.busymate.cli("breakpoints", "continue", str(first[0]["id"]))
            check(r.returncode == 0 and ws.recv(timeout=10) == "one", "continued: it goes on as it was", r.stderr)
            ws.send("two")
            second = held()
            edited = os.path.join(w.base, "edited.txt")
            with open(edited, "w") as f:
                f.write("TWO, edited")
            r = w.busymate.cli("breakpoints", "continue", str(second[0]["id"]), "--raw-file", edited)
            check(r.returncode == 0 and ws.recv(timeout=10) == "TWO, edited", "edited: the edit goes instead", r.stderr)
            ws.send("three")
            third = held()
            r = w.busymate.cli("breakpoints", "abort", str(third[0]["id"]))
            check(r.returncode == 0, "abort drops it", r.stderr)
            ws.send("four")
            fourth = held()
            w.busymate.cli("breakpoints", "continue", str(fourth[0]["id"]))
            check(ws.recv(timeout=10) == "four", "after a dropped message the next goes on; the dropped one never arrived")
        # Compressed by a client that keeps its deflate window: it can only go on as it came.
        with open_socket(w, "/held?case=zipped_hold", deflate=True) as ws:
            ws.send("zipped " * 20)
            zipped = wait_until(lambda: [e for e in held_events(w) if "zipped_hold" in e["url"] and e["outcome"] is None], 10)
            r = w.busymate.cli("breakpoints", "continue", str(zipped[0]["id"]), "--raw-file", edited) if zipped else None
            check(r is not None and r.returncode != 0 and "refused" in r.stderr, "an edit of a compressed message whose sender keeps its window is refused",
                  r and r.stderr)
            r = w.busymate.cli("breakpoints", "continue", str(zipped[0]["id"])) if zipped else None
            check(r is not None and r.returncode == 0 and ws.recv(timeout=10) == "zipped " * 20, "it stays held and goes on as it came", r and r.stderr)
    finally:
        w.busymate.cli("breakpoints", "remove", "messages", "*/held*")
        applied(w)
    row = socket_row(w, tag, state="closed")
    detail, _ = messages(w, row["id"]) if row else (None, None)
    listed = [(m["from"], m["origin"], payload(m)) for m in (detail or {}).get("messages", [])]
    check(("client", "edited", b"TWO, edited") in listed and ("client", "dropped", b"three") in listed and ("client", "relayed", b"one") in listed
          and not any(p == b"three" and f == "server" for f, _, p in listed), "the socket's messages say which were edited and dropped", listed)


def page_held(w):
    import browser
    browser.page_held(w, open_socket, applied)
