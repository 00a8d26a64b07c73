#!/usr/bin/env python3
"""Hostile and slow clients of the web front, for WebFrontProcessTests.

usage:
  web.py slowloris PORT COUNT INTERVAL SECONDS
      COUNT connections each start a request head and add a byte every
      INTERVAL seconds for SECONDS. Prints "open N" once connected, then one
      JSON line: opened, closed (by the server), timeouts (408 answers) and
      the longest a connection lasted.
  web.py slowread PORT PATH TOKEN WAIT OUT
      Sends one GET with the token, reads nothing for WAIT seconds, then
      the whole answer into OUT. Prints one JSON line: status, bytes, error.
"""
import http.client, json, resource, select, socket, sys, time


def slowloris(port, count, interval, seconds):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 64)), hard))
    held, started = [], {}
    for _ in range(count):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /login HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            break
        s.setblocking(False)
        held.append(s)
        started[s] = time.monotonic()
    print("open %d" % len(held), flush=True)
    closed, timeouts, longest = set(), 0, 0.0
    end = time.monotonic() + seconds
    next_byte = time.monotonic() + interval
    while time.monotonic() < end and len(closed) < len(held):
        open_ = [s for s in held if s not in closed]
        # poll, not select: descriptors past 1024.
        poller = select.poll()
        by_fd = {s.fileno(): s for s in open_}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(200):
            s = by_fd[fd]
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if b" 408 " in data:
                timeouts += 1
            if not data or b" 408 " in data:
                closed.add(s)
                longest = max(longest, time.monotonic() - started[s])
        if time.monotonic() >= next_byte:
            next_byte += interval
            for s in open_:
                if s in closed:
                    continue
                try:
                    s.send(b"X")
                except OSError:
                    closed.add(s)
                    longest = max(longest, time.monotonic() - started[s])
    print(json.dumps({"opened": len(held), "closed": len(closed), "timeouts": timeouts, "longest": round(longest, 1)}), flush=True)
    for s in held:
        s.close()


def slowread(port, path, token, wait, out):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.connect()
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    conn.request("GET", path, headers={"Authorization": "Bearer " + token})
    time.sleep(wait)
    result = {"status": None, "bytes": 0, "error": None}
    try:
        response = conn.getresponse()
        result["status"] = response.status
        with open(out, "wb") as f:
            while True:
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
                result["bytes"] += len(chunk)
    except Exception as e:  # a cut answer: IncompleteRead, a reset, a closed socket
        result["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "slowloris":
        slowloris(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    elif mode == "slowread":
        slowread(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)
