"""Breakpoints on HTTP/2 streams: a held stream holds only itself (its
sibling on the same connection is answered meanwhile), is continued or
aborted from the CLI, and the connection goes on."""
import json

from harness import check, wait_until
from stream_cases import h2_via_mitm


def held(w, expect):
    """The held messages, once there are `expect` of them."""
    def get():
        r = w.busymate.cli("breakpoints", "list", "--json")
        rows = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
        return rows if rows is not None and len(rows) == expect else None
    return wait_until(get, 10, 0.1) or []


def breakpoint_streams(w):
    """A request breakpoint holds one stream; its sibling completes; continue and abort from the CLI."""
    w.busymate.write_settings(breakpoints={"request": ["~u case=held-h2"]})
    w.busymate.wait_applied()
    client = None
    try:
        client = h2_via_mitm(w, "main_tls")
        if not client:
            return
        authority = "localhost:%d" % w.origins["main_tls"]
        first = client.request("GET", authority, "/echo?case=held-h2-continue")
        sibling = client.request("GET", authority, "/echo?case=sibling-h2")
        client.wait([sibling], 10)
        s = client.streams[sibling]
        check(s.ended and s.status == "200", "the sibling stream is answered while the other is held", "status %s, ended %s" % (s.status, s.ended))
        holding = held(w, 1)
        check(len(holding) == 1 and not client.streams[first].ended, "the breakpoint holds one stream, still unanswered",
              "held %s, ended %s" % (holding, client.streams[first].ended))
        if holding:
            r = w.busymate.cli("breakpoints", "continue", str(holding[0].get("id")))
            check(r.returncode == 0, "`breakpoints continue ID` sends it on", r.stderr[-300:])
        client.wait([first], 10)
        s = client.streams[first]
        check(s.ended and s.status == "200" and b"held-h2-continue" in bytes(s.data), "the continued stream gets the origin's answer",
              "status %s, ended %s, body %r" % (s.status, s.ended, bytes(s.data)[:200]))
        aborted = client.request("GET", authority, "/echo?case=held-h2-abort")
        holding = held(w, 1)
        if holding:
            r = w.busymate.cli("breakpoints", "abort", str(holding[0].get("id")))
            check(r.returncode == 0, "`breakpoints abort ID` answers it", r.stderr[-300:])
        client.wait([aborted], 10)
        check(client.streams[aborted].status == "502", "the aborted stream gets Busymate's 502", client.streams[aborted].status)
        after = client.request("GET", authority, "/echo?case=after-held-h2")
        client.wait([after], 10)
        check(client.streams[after].status == "200" and client.goaway is None, "the connection goes on after both",
              "status %s, goaway %s" % (client.streams[after].status, client.goaway))
    finally:
        if client:
            client.close()
        w.busymate.write_settings()
        w.busymate.wait_applied()
    rows = w.busymate.rows("~u case=held-h2", expect=2)
    check(any(r.get("http_version") == "HTTP/2.0" and r.get("status") == 200 and "continue" in r["url"] for r in rows),
          "the continued exchange's row is HTTP/2.0, 200", json.dumps(rows)[:600])


CASES = [("breakpoint_streams", breakpoint_streams)]
