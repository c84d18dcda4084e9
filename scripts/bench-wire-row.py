#!/usr/bin/env python3
"""Rows and the table of scripts/bench-wire.sh.

    scripts/bench-wire-row.py DIR CLIENT STREAMS TRIAL PORT   # one JSON row of a trial
    scripts/bench-wire-row.py --table ROWS.jsonl              # the Markdown table

A row: the wire's TTFT and ITL (scripts/wire.py on DIR/wire.pcap), the client's own mean TTFT
(request-sim: its records; vllm-bench: its result file), what the client adds (its mean minus
the wire's), the server's lateness on the wire (wire TTFT - 50 ms), CPU and peak RSS.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

FIRST_TOKEN_MS = 50.0


def p99(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))] if v else None


def client_ttft(d, client):
    """(mean TTFT ms, p99 TTFT ms, requests ok, extra) as the client reported them; extra:
    request-sim's own send drift and receive lateness p99 from its summary."""
    if client.startswith("request-sim"):
        try:
            recs = [json.loads(l) for l in open(os.path.join(d, "records.jsonl"))]
        except OSError:
            return None, None, 0, {}
        t = [r["ttft_ms"] for r in recs if r.get("status") == "ok" and r.get("ttft_ms") is not None]
        extra = {}
        try:
            sm = json.load(open(os.path.join(d, "records.jsonl.summary.json")))
            extra = {"drift_p99_ms": sm["drift"].get("p99_ms"),
                     "rx_late_p99_ms": sm.get("rx_late", {}).get("p99_ms"),
                     "same_host": bool(sm["run"].get("realtime", {}).get("same_host"))}
        except (OSError, KeyError, ValueError):
            pass
        return (sum(t) / len(t) if t else None), p99(t), len(t), extra
    files = sorted(glob.glob(os.path.join(d, "result", "*.json")))
    if not files:
        return None, None, 0, {}
    j = json.load(open(files[-1]))
    return j.get("mean_ttft_ms"), j.get("p99_ttft_ms"), j.get("completed", 0), {}


def row(d, client, streams, trial, port):
    w = wire.summary([r for r in wire.requests(os.path.join(d, "wire.pcap"), port) if r["tokens"]])
    ttft, ttft99, ok, extra = client_ttft(d, client)
    cpu = rss = None
    try:
        e, u, s, m = open(os.path.join(d, "time.txt")).read().split()[-4:]
        cpu, rss = float(u) + float(s), int(m) / 1024
    except (OSError, ValueError):
        pass
    fds = ports = None
    try:
        fds, ports = (int(x) for x in open(os.path.join(d, "peaks.txt")).read().split())
    except (OSError, ValueError):
        pass
    wt = w["ttft_mean_ms"]
    return {
        "client": client, "streams": streams, "trial": trial, "ok": ok,
        "wire_requests": w["with_tokens"],
        "wire_ttft_ms": wt, "wire_ttft_p99_ms": w["ttft_p99_ms"], "wire_itl_ms": w["itl_mean_ms"],
        "client_ttft_ms": ttft,
        "added_ms": None if ttft is None or wt is None else ttft - wt,
        "client_ttft_p99_ms": ttft99,
        "added_p99_ms": None if ttft99 is None or w["ttft_p99_ms"] is None else ttft99 - w["ttft_p99_ms"],
        **extra,
        "server_late_ms": None if wt is None else wt - FIRST_TOKEN_MS,
        "reported_minus_50_ms": None if ttft is None else ttft - FIRST_TOKEN_MS,
        "cpu_s": cpu, "rss_mib": rss, "peak_fds": fds, "peak_ports": ports,
    }


def peaks(rs):
    """The largest peak open descriptors / client ports over the trials."""
    fds = [r.get("peak_fds") for r in rs if r.get("peak_fds") is not None]
    ports = [r.get("peak_ports") for r in rs if r.get("peak_ports") is not None]
    return f"{max(fds)} / {max(ports)}" if fds and ports else "n/a"


def table(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    keys = []
    for r in rows:
        k = (r["streams"], r["client"])
        if k not in keys:
            keys.append(k)
    f = lambda v: "n/a" if v is None else f"{v:.1f}"

    def cell(rs, name, digits=1):
        v = [r[name] for r in rs if r[name] is not None]
        if not v:
            return "n/a"
        m = sum(v) / len(v)
        return f"{m:.{digits}f}" if len(v) == 1 else f"{m:.{digits}f} ({min(v):.{digits}f}–{max(v):.{digits}f})"

    print("| streams | client | trials | ok | added to TTFT by the client, mean (ms) | added, p99 (ms) | the server's own lateness on the wire (ms) | reported TTFT − 50 (ms) | wire ITL (ms) | CPU (s) | RSS (MiB) | peak fds / client ports |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s, c in sorted(keys):
        rs = [r for r in rows if r["streams"] == s and r["client"] == c]
        print(f"| {s} | {c} | {len(rs)} | {min(r['ok'] for r in rs)} | {cell(rs, 'added_ms')} | {cell(rs, 'added_p99_ms')} | {cell(rs, 'server_late_ms')} | "
              f"{cell(rs, 'reported_minus_50_ms')} | {cell(rs, 'wire_itl_ms', 2)} | {cell(rs, 'cpu_s', 2)} | {cell(rs, 'rss_mib', 0)} | "
              f"{peaks(rs)} |")
    print("\nEach cell: mean over the trials (min–max). Added p99: the client's p99 TTFT minus the wire's.")


def main():
    if sys.argv[1] == "--table":
        table(sys.argv[2])
        return
    d, client, streams, trial, port = sys.argv[1:6]
    print(json.dumps(row(d, client, int(streams), int(trial), int(port))))


if __name__ == "__main__":
    main()
