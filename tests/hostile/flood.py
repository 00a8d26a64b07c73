#!/usr/bin/env python3
"""Opens COUNT connections to a proxy and holds them SECONDS, sending
nothing: the descriptor-exhaustion test. Prints how many connected.

usage: flood.py PORT COUNT SECONDS
"""
import socket, sys, time

port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(count):
    try:
        s = socket.socket()
        s.settimeout(1)
        s.connect(("127.0.0.1", port))
        held.append(s)
    except OSError:
        break
print(len(held), flush=True)
time.sleep(seconds)
for s in held:
    s.close()
