#!/usr/bin/env python3
"""WebSockets end to end with real peers (issue 25): the Python websockets
library as client and server (plain and over TLS, with and without
permessage-deflate), raw sockets for what no library sends, through
Busymate's proxy port on a temp group. Each case asserts what the client saw
and what Busymate stored (`busymate list --json`, `show --messages --json`).

usage: run.py --bin DIR [--keep] [--only case,case…] [--list]

The origin listens on 127.0.0.1 port 0 as "localhost", which is on the
SSL-proxying list: a CONNECT to it is read (plaintext as HTTP, TLS
intercepted with Busymate's CA, which the clients trust). Run as root (the
tunnel runs as user busymate).
"""
import argparse, os, shutil, sys, tempfile, time, traceback

sys.dont_write_bytecode = True  # no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "h2"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from harness import check  # noqa: E402
import cases  # noqa: E402


class World:
    def __init__(self, busymate, origins, base):
        self.busymate, self.origins, self.base = busymate, origins, base

    @property
    def proxy(self):
        return self.busymate.port


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", help="the directory with busymate-app, busymate-tunnel and busymate")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--only", help="the cases to run, comma-separated (see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    args = parser.parse_args()
    if args.list:
        print("\n".join(name for name, _ in cases.CASES))
        return 0
    if not args.bin:
        parser.error("--bin DIR is required")
    selected = cases.CASES if not args.only else [c for c in cases.CASES if c[0] in args.only.split(",")]
    unknown = set(args.only.split(",")) - {c[0] for c in cases.CASES} if args.only else set()
    if unknown:
        parser.error("unknown cases: %s (see --list)" % ", ".join(sorted(unknown)))
    if os.geteuid() != 0:
        print("*" * 72 + "\nSKIPPED: the WebSocket suite needs root (the tunnel drops to user busymate)\n" + "*" * 72, flush=True)
        return 0
    started = time.monotonic()
    base = tempfile.mkdtemp(prefix="bmws-", dir="/tmp")
    os.chmod(base, 0o755)
    origin, busymate = None, None
    try:
        certs = harness.make_certs(base)
        origin = harness.Peer(base, "origin", [os.path.join(HERE, "origin.py"), "--cert", certs["chain"], "--key", certs["key"]])
        busymate = harness.Busymate(base, os.path.abspath(args.bin), certs["ca"])
        world = World(busymate, origin.ports, base)
        print("websocket suite: proxy 127.0.0.1:%d, origins %s, scratch %s" % (busymate.port, origin.ports, base), flush=True)
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
        if origin:
            origin.stop()
    results = harness.RESULTS
    failed = [r for r in results if r[2] is False]
    print("\n%-24s %-6s %s" % ("case", "result", "checks (failed ones with their evidence above)"))
    for name in dict.fromkeys(r[0] for r in results):
        mine = [r for r in results if r[0] == name]
        bad = [r for r in mine if r[2] is False]
        print("%-24s %-6s %d/%d%s" % (name, "FAIL" if bad else "PASS", len([r for r in mine if r[2]]), len([r for r in mine if r[2] is not None]),
                                       "".join("\n%-31s- %s" % ("", r[1]) for r in bad)))
    if failed and busymate and os.path.exists(busymate.log):
        print("--- the last 30 lines of the supervisor log (%s):" % busymate.log)
        print("".join(open(busymate.log, errors="replace").readlines()[-30:]), end="")
    if failed or args.keep:
        print("scratch directory kept: " + base)
    else:
        shutil.rmtree(base, ignore_errors=True)
    print("websocket: %d passed, %d failed (cases: %d of %d failed), %.0f s" % (
        len([r for r in results if r[2]]), len(failed), len({r[0] for r in failed}), len({r[0] for r in results}), time.monotonic() - started), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
