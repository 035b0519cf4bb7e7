#!/usr/bin/env python3
"""slow_client.py PORT CONNECTIONS INTERVAL SECONDS: a slow-loris client of 127.0.0.1:PORT.

Keeps CONNECTIONS connections open, each sending an HTTP request head one byte every INTERVAL
seconds and never finishing it; a connection the server closes is opened again at once. Runs for
SECONDS, then prints one line: "opened N closed_by_server M longest_s L", L being the longest any
connection the server closed had lived. Closes are looked for every 0.1 s, not only at the next
byte, so L is what the server did, not the client's sending pace."""
import socket
import sys
import time

HEAD = b"GET /healthz HTTP/1.1\r\nHost: agent\r\n" + b"X-Slow: " + b"a" * 4000


def main():
    port, n, interval, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    opened = closed = 0
    longest = 0.0
    conns = []  # [socket, opened_at, bytes_sent, next_send_at]

    def connect():
        nonlocal opened
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        opened += 1
        now = time.monotonic()
        return [s, now, 0, now]

    conns = [connect() for _ in range(n)]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, c in enumerate(conns):
            s, born, sent, next_send = c
            gone = False
            try:
                if s.recv(4096, socket.MSG_PEEK) == b"":
                    gone = True
            except BlockingIOError:
                pass
            except OSError:
                gone = True
            if not gone and time.monotonic() >= next_send:
                try:
                    s.send(HEAD[sent % len(HEAD):sent % len(HEAD) + 1])
                    c[2] += 1
                    c[3] = time.monotonic() + interval
                except OSError:
                    gone = True
            if gone:
                closed += 1
                longest = max(longest, time.monotonic() - born)
                s.close()
                conns[i] = connect()
        time.sleep(0.1)
    for c in conns:
        c[0].close()
    print(f"opened {opened} closed_by_server {closed} longest_s {longest:.1f}", flush=True)


if __name__ == "__main__":
    main()
