#!/usr/bin/env python3
"""HTTP/2 and gRPC end to end with real peers (issue 23): curl --http2,
Python's h2 (a client, hostile ones in raw frames), Chromium (an HTTP/2
page, direct and through Busymate), hypercorn and an
h2-only and an HTTP/1-only origin, grpcio's client and server, through
Busymate's explicit proxy on a temp group. Each case asserts what the client
saw and the row Busymate stored (`busymate list/show --json`).

usage: run.py --bin DIR [--keep] [--only case,case…] [--list]

Origins run on 127.0.0.1 port 0 with TLS from a test CA made here, trusted by
Busymate through ssl_proxying.upstream_trust; "localhost" is intercepted.
Choices asserted here (docs/usage.md: HTTP/2 and gRPC, and the h2 suite):
- ALPN is eager (docs/decisions.md): the client keeps h2 and Busymate translates for an
  HTTP/1.1-only origin.
- curl ignores --http2-prior-knowledge through a proxy (it says so and
  sends HTTP/1.1 absolute-form); h2c prior knowledge is tested with the h2
  library sending the preface to the proxy port, and with curl's
  --proxytunnel (h2c inside a CONNECT to a plaintext origin).
- Each hostile client must end with a GOAWAY or a close (an HPACK bomb may
  instead be refused stream by stream: RST_STREAM or 431), the tunnel the
  same process, its RSS less than 100 MB above where it started, and a fresh
  request answered.
- A client's FIN (HTTP/2 has no half-close) ends its connection and its
  streams at once, a waiting one included (as mitmproxy does); a stream
  refused by an origin's GOAWAY is retried once or answered 502 saying so.
Run as root (the tunnel runs as user busymate). Traffic stays on loopback.
"""
import argparse, os, shutil, sys, tempfile, time, traceback

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402
import alpn_cases, basic_cases, breakpoint_cases, browser_cases, grpc_cases, hostile_cases, lifecycle_cases, rule_cases, stream_cases  # noqa: E402

CASES = (basic_cases.CASES + alpn_cases.CASES + stream_cases.CASES + lifecycle_cases.CASES + breakpoint_cases.CASES + rule_cases.CASES + grpc_cases.CASES
         + browser_cases.CASES + hostile_cases.CASES)


class World:
    """What every case gets: Busymate, the origins' and the gRPC server's ports, the test CA."""

    def __init__(self, busymate, origins, grpc_ports, certs, base):
        self.busymate, self.origins, self.grpc, self.certs, self.base = busymate, origins, grpc_ports, certs, base

    @property
    def proxy(self):
        return self.busymate.port

    def url(self, origin, path, scheme="https"):
        return "%s://localhost:%d%s" % (scheme, self.origins[origin], path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", help="the directory with busymate-app, busymate-tunnel and busymate")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--only", help="the cases to run, comma-separated (see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    args = parser.parse_args()
    if args.list:
        for name, _ in CASES:
            print(name)
        return 0
    if not args.bin:
        parser.error("--bin DIR is required")
    selected = CASES if not args.only else [c for c in CASES if c[0] in args.only.split(",")]
    unknown = set(args.only.split(",")) - {c[0] for c in CASES} if args.only else set()
    if unknown:
        parser.error("unknown cases: %s (see --list)" % ", ".join(sorted(unknown)))
    if os.geteuid() != 0:
        print("*" * 72 + "\nSKIPPED: the HTTP/2 suite needs root (the tunnel drops to user busymate)\n" + "*" * 72, flush=True)
        return 0
    try:
        import h2, hpack, hypercorn, grpc  # noqa: F401
    except ImportError as e:
        print("FAILED: %s (scripts/install-deps.sh --test installs h2, hypercorn and grpcio)" % e, flush=True)
        return 1
    if not shutil.which("curl"):
        print("FAILED: curl is needed (scripts/install-deps.sh --test)", flush=True)
        return 1
    started = time.monotonic()
    base = tempfile.mkdtemp(prefix="bmh2-", dir="/tmp")
    os.chmod(base, 0o755)
    here = harness.HERE
    peers, busymate = [], None
    try:
        certs = harness.make_certs(base)
        origins = harness.Peer(base, "origins", [os.path.join(here, "origins.py"), "--cert", certs["chain"], "--key", certs["key"]])
        peers.append(origins)
        grpc_server = harness.Peer(base, "grpc", [os.path.join(here, "grpc_peer.py"), "serve", "--cert", certs["chain"], "--key", certs["key"]])
        peers.append(grpc_server)
        busymate = harness.Busymate(base, os.path.abspath(args.bin), certs["ca"])
        world = World(busymate, origins.ports, grpc_server.ports, certs, base)
        print("h2 suite: proxy 127.0.0.1:%d, origins %s, gRPC %s, scratch %s" % (busymate.port, origins.ports, grpc_server.ports, base), flush=True)
        for name, body in selected:
            harness.CURRENT[0] = name
            print("--- " + name, flush=True)
            began = time.monotonic()
            try:
                if busymate.process.poll() is not None:
                    raise RuntimeError("busymate-app is not running (exit %s)" % busymate.process.returncode)
                body(world)
            except Exception as error:
                check(False, "the case ran to its end", "%s: %s\n%s" % (type(error).__name__, error, traceback.format_exc()[-800:]))
            print("(%s: %.1f s)" % (name, time.monotonic() - began), flush=True)
    except Exception as error:
        harness.CURRENT[0] = "setup"
        check(False, "the suite's peers and Busymate started", "%s: %s" % (type(error).__name__, error))
    finally:
        if busymate:
            busymate.stop()
        for peer in peers:
            peer.stop()
    results = harness.RESULTS
    failed = [r for r in results if r[2] is False]
    print("\n%-28s %-6s %s" % ("case", "result", "checks (failed ones with their evidence above)"))
    for name in dict.fromkeys(r[0] for r in results):
        mine = [r for r in results if r[0] == name]
        bad = [r for r in mine if r[2] is False]
        print("%-28s %-6s %d/%d%s" % (name, "FAIL" if bad else "PASS", len([r for r in mine if r[2]]), len([r for r in mine if r[2] is not None]),
                                       "".join("\n%-35s- %s" % ("", r[1]) for r in bad)))
    if failed and busymate and os.path.exists(busymate.log):
        print("--- the last 30 lines of the supervisor log (%s):" % busymate.log)
        print("".join(open(busymate.log, errors="replace").readlines()[-30:]), end="")
    if failed or args.keep:
        print("scratch directory kept: " + base)
    else:
        shutil.rmtree(base, ignore_errors=True)
    cases_failed = len({r[0] for r in failed})
    print("h2: %d passed, %d failed (cases: %d of %d failed), %.0f s" % (
        len([r for r in results if r[2]]), len(failed), cases_failed, len({r[0] for r in results}), time.monotonic() - started), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
