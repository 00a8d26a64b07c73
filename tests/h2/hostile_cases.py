"""Hostile HTTP/2 clients on the intercepted leg (CONNECT + TLS, ALPN h2):
Rapid Reset, CONTINUATION flood, HPACK bomb, SETTINGS flood, zero-window
stall. Each must end with the tunnel the same process, its RSS less than
100 MB above where it started (sampled every 50 ms during the attack), a
fresh request answered, and the attacker told: a GOAWAY or a close."""
import time

import attacks, h2client
from harness import RSSSampler, check, curl, note

RSS_BOUND_KB = 100 * 1024


def attacker(w):
    """A TLS connection through the MITM that speaks h2, or None (a failed check) when h2 was not negotiated."""
    sock, alpn = h2client.open_mitm(w.proxy, "localhost", w.origins["main_tls"], w.busymate.ca, alpn=("h2",))
    if not check(alpn == "h2", "the proxy negotiated h2 with the attacker (else there is no HTTP/2 to attack)", "ALPN %r" % alpn):
        sock.close()
        return None
    return sock


def afterwards(w, name, pid, sampler):
    grown = sampler.peak - sampler.before
    check(grown < RSS_BOUND_KB, "the tunnel's RSS stayed under +100 MB (%d → peak %d MB)" % (sampler.before // 1024, sampler.peak // 1024),
          "grew by %d MB" % (grown // 1024))
    time.sleep(0.5)
    check(w.busymate.tunnel_pid() == pid, "the tunnel is the same process (pid %s)" % pid, "now %s" % w.busymate.tunnel_pid())
    results, rc, log = curl(w.proxy, w.busymate.ca, [w.url("main_tls", "/echo?case=after-%s" % name)], "--http2")
    check(rc == 0 and results[0]["code"] == "200", "a fresh request afterwards is answered", "rc %d %s %s" % (rc, results[0]["code"], log[-400:]))


def attack(w, name, run):
    pid = w.busymate.tunnel_pid()
    sock = attacker(w)
    if sock is None:
        return
    with RSSSampler(pid) as sampler:
        try:
            outcome = run(sock)
        finally:
            sock.close()
    afterwards(w, name, pid, sampler)
    return outcome


def ended(watcher, what):
    check(watcher.ended(), "%s: the attacker got a GOAWAY or a close" % what, watcher.describe())


def rapid_reset(w):
    authority = "localhost:%d" % w.origins["main_tls"]

    def run(sock):
        watcher, said = attacks.rapid_reset(sock, authority, "/echo?case=rapid-reset")
        note(said + ": " + watcher.describe())
        ended(watcher, "Rapid Reset")
    attack(w, "rapid-reset", run)


def continuation_flood(w):
    authority = "localhost:%d" % w.origins["main_tls"]

    def run(sock):
        watcher, said = attacks.continuation_flood(sock, authority, "/echo?case=continuation")
        note(said + ": " + watcher.describe())
        ended(watcher, "CONTINUATION flood")
    attack(w, "continuation", run)


def hpack_bomb(w):
    authority = "localhost:%d" % w.origins["main_tls"]

    def run(sock):
        watcher, refused, said = attacks.hpack_bomb(sock, authority, "/echo?case=hpack-bomb")
        note(said + ": " + watcher.describe())
        check(watcher.ended() or refused, "HPACK bomb: the attacker got a GOAWAY or a close, or each bomb request was refused (RST_STREAM or 431)",
              watcher.describe())
    attack(w, "hpack-bomb", run)


def settings_flood(w):
    def run(sock):
        watcher, said = attacks.settings_flood(sock)
        note(said + ": " + watcher.describe())
        ended(watcher, "SETTINGS flood")
    attack(w, "settings-flood", run)


def zero_window(w):
    """12 streams of 10 MB each that the client never opens its window for (120 MB the proxy must not
    read ahead of the client), held 8 s; a sibling stream on the same connection still completes."""
    pid = w.busymate.tunnel_pid()
    sock = attacker(w)
    if sock is None:
        return
    authority = "localhost:%d" % w.origins["main_tls"]
    client = h2client.H2Client(sock)
    with RSSSampler(pid) as sampler:
        try:
            stalled = [client.request("GET", authority, "/big?size=10000000&case=zero-window-%02d" % i) for i in range(12)]
            client.stalled.update(stalled)
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline and client.pump(0.2):
                pass
            received = sum(len(client.streams[s].data) for s in stalled)
            check(received <= 65535, "the stalled streams got no more than the window the client gave (%d bytes)" % received, received)
            sibling = client.request("GET", authority, "/echo?case=zero-window-sibling")
            client.conn.increment_flow_control_window(4 << 20)  # room on the connection; the stalled streams' own windows stay shut
            client.flush()
            client.wait([sibling], 15)
            s = client.streams[sibling]
            check(s.ended and s.status == "200", "a sibling stream on the stalled connection completes (a slow reader stalls only its own streams)",
                  "status %s, ended %s, reset %s, goaway %s, closed %s" % (s.status, s.ended, s.reset, client.goaway, client.closed))
            if client.closed or client.goaway is not None:
                note("the proxy ended the stalled connection itself (GOAWAY %s, closed %s)" % (client.goaway, client.closed))
        finally:
            client.close()
    afterwards(w, "zero-window", pid, sampler)


CASES = [
    ("hostile_rapid_reset", rapid_reset), ("hostile_continuation_flood", continuation_flood), ("hostile_hpack_bomb", hpack_bomb),
    ("hostile_settings_flood", settings_flood), ("hostile_zero_window", zero_window),
]
