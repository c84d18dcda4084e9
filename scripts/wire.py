#!/usr/bin/env python3
"""The wire as the clock: TTFT and ITL of every streamed HTTP request in a pcap (tcpdump on
loopback), for scripts/bench-wire.sh (docs/performance.md "Measured on the wire").

Per TCP connection to the server's port: the request is the client's first segment whose
payload starts with an HTTP method; each server segment carrying Server-Sent Events is a token
arrival (its events counted by `data: ` lines, `[DONE]` left out). Wire TTFT is the first
token-carrying segment's time minus the request's, ITL the gaps between token-carrying
segments. A connection that carries several requests in turn (keep-alive) is split at each
new request.

    scripts/wire.py CAPTURE.pcap --port 8089 [--json]

Written here, standard library only: the classic pcap format (microsecond or nanosecond
magic; Ethernet, Linux cooked v1/v2 or BSD loopback link types), IPv4/IPv6, TCP.
"""
import argparse
import json
import struct
import sys

METHODS = (b"POST ", b"GET ", b"PUT ")


def packets(path):
    """(time in s, link type, frame bytes) of every captured packet."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise SystemExit(f"{path}: not a pcap file (too short)")
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            endian = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            endian = ">"
        else:
            raise SystemExit(f"{path}: not a classic pcap file (magic {magic.hex()}); pcapng is not read")
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        link = struct.unpack(endian + "I", head[20:24])[0]
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _ = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec + frac / (1e9 if nano else 1e6), link, data


def ip_payload(link, frame):
    """The IP packet inside a frame, or None."""
    if link == 1:  # Ethernet
        off, ethertype = 14, frame[12:14]
    elif link == 113:  # Linux cooked v1
        off, ethertype = 16, frame[14:16]
    elif link == 276:  # Linux cooked v2
        off, ethertype = 20, frame[0:2]
    elif link == 0:  # BSD loopback: a 4-byte family
        return frame[4:]
    elif link == 101:  # raw IP
        return frame
    else:
        return None
    if ethertype not in (b"\x08\x00", b"\x86\xdd"):
        return None
    return frame[off:]


def tcp_segment(ip):
    """(src, sport, dst, dport, payload) of a TCP segment, or None."""
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4:
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6:
            return None
        total = struct.unpack("!H", ip[2:4])[0]
        src, dst, tcp = ip[12:16], ip[16:20], ip[ihl:total]
    elif version == 6:
        if ip[6] != 6:
            return None
        plen = struct.unpack("!H", ip[4:6])[0]
        src, dst, tcp = ip[8:24], ip[24:40], ip[40 : 40 + plen]
    else:
        return None
    if len(tcp) < 20:
        return None
    sport, dport = struct.unpack("!HH", tcp[:4])
    off = (tcp[12] >> 4) * 4
    return src, sport, dst, dport, tcp[off:]


def requests(path, port):
    """Each request's (sent time, [token segment times], events) in the capture."""
    conns = {}
    out = []
    for t, link, frame in packets(path):
        seg = tcp_segment(ip_payload(link, frame))
        if not seg:
            continue
        src, sport, dst, dport, payload = seg
        if not payload:
            continue
        if dport == port:
            key = (src, sport)
            if payload.startswith(METHODS):
                r = {"sent": t, "tokens": [], "events": 0}
                out.append(r)
                conns[key] = r
        elif sport == port:
            r = conns.get((dst, dport))
            if r is None:
                continue
            events = payload.count(b"data: ") - payload.count(b"data: [DONE]")
            if events > 0:
                r["tokens"].append(t)
                r["events"] += events
    return out


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    i = min(len(v) - 1, max(0, int(round(q / 100 * (len(v) - 1)))))
    return v[i]


def summary(reqs):
    ttft = [(r["tokens"][0] - r["sent"]) * 1e3 for r in reqs if r["tokens"]]
    itl = [
        (b - a) * 1e3
        for r in reqs
        for a, b in zip(r["tokens"], r["tokens"][1:])
    ]
    mean = lambda v: sum(v) / len(v) if v else None
    return {
        "requests": len(reqs),
        "with_tokens": len(ttft),
        "ttft_mean_ms": mean(ttft),
        "ttft_p50_ms": pct(ttft, 50),
        "ttft_p99_ms": pct(ttft, 99),
        "itl_mean_ms": mean(itl),
        "itl_p99_ms": pct(itl, 99),
        "token_segments": sum(len(r["tokens"]) for r in reqs),
        "events": sum(r["events"] for r in reqs),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--port", type=int, required=True, help="the server's TCP port")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    s = summary(requests(a.pcap, a.port))
    if a.json:
        json.dump(s, sys.stdout)
        print()
        return
    f = lambda x: "n/a" if x is None else f"{x:.2f}"
    print(
        f"{s['requests']} requests ({s['with_tokens']} with tokens): wire TTFT mean {f(s['ttft_mean_ms'])} "
        f"p50 {f(s['ttft_p50_ms'])} p99 {f(s['ttft_p99_ms'])} ms, ITL mean {f(s['itl_mean_ms'])} "
        f"p99 {f(s['itl_p99_ms'])} ms, {s['events']} events in {s['token_segments']} segments"
    )


if __name__ == "__main__":
    main()
