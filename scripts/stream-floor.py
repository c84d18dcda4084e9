#!/usr/bin/env python3
"""The kernel's floor for reading a token stream on this host (docs/performance.md, "CPU per
streamed token"): a minimal reader that keeps C streamed completions open against an llm-sim
(or any OpenAI-compatible server) and does nothing but one non-blocking `recv` per ready socket
per `epoll` wake-up, which is what any client that timestamps every token as it is read must do
at least. It runs N requests of L1 and then of L2 output tokens and prints its own CPU
(getrusage) per streamed token as the difference of the two, split into user and system time,
with the reads and wake-ups per token. Its system time per token is what the kernel charges for
one read per token here; a replay client cannot go below it without reading tokens late.

    scripts/stream-floor.py PORT [N=400] [L1=32] [L2=512] [C=100] [MODEL=llm-sim]

Bounded: N requests per length, each socket read until the server ends its chunked answer,
and a 300 s limit per length. Loopback only (127.0.0.1).
"""
import json
import resource
import selectors
import socket
import sys
import time


def run(port, n, length, conc, model):
    body = json.dumps({"model": model, "prompt": "hello " * 200, "max_tokens": length,
                       "min_tokens": length, "ignore_eos": True, "stream": True}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)).encode()
    sel = selectors.DefaultSelector()
    tail = {}

    def start():
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head + body)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        tail[s] = b""

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    deadline = time.monotonic() + 300
    started = done = reads = wakes = events = 0
    while started < min(conc, n):
        start()
        started += 1
    while done < n:
        if time.monotonic() > deadline:
            sys.exit("stream-floor.py: over 300 s, stopped")
        ready = sel.select(timeout=5)
        wakes += 1
        for key, _ in ready:
            s = key.fileobj
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            reads += 1
            events += d.count(b"data: ")
            t = (tail[s] + d)[-8:]
            tail[s] = t
            if not d or t.endswith(b"0\r\n\r\n"):
                sel.unregister(s)
                s.close()
                del tail[s]
                done += 1
                if started < n:
                    start()
                    started += 1
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, events, reads, wakes)


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    port = int(a[0])
    n, l1, l2, conc = (int(x) for x in (a[1:5] + ["400", "32", "512", "100"][len(a[1:5]):]))
    model = a[5] if len(a) > 5 else "llm-sim"
    u1, s1, e1, r1, w1 = run(port, n, l1, conc, model)
    u2, s2, e2, r2, w2 = run(port, n, l2, conc, model)
    dt = max(e2 - e1, 1)
    print("kernel floor (minimal reader, one recv per ready socket per epoll wake-up, %d at a time): "
          "%.2f us/token system + %.2f us/token user (Python); %.2f reads and %.2f wake-ups per "
          "token; events %d / %d"
          % (conc, (s2 - s1) / dt * 1e6, (u2 - u1) / dt * 1e6, (r2 - r1) / dt, (w2 - w1) / dt, e1, e2))


if __name__ == "__main__":
    main()
