#!/usr/bin/env python3
"""One row of scripts/cluster.sh: a replay's summary and records against the instances' own
counters (before.txt / after.txt: `instance hits successes` per line) and the router's
per-worker successes (router-before.txt / router-after.txt, smg only).

    scripts/cluster-row.py RUN_DIR NAME EXIT_STATUS
Prints one tab-separated line; the header is scripts/cluster-row.py --header.
"""
import json
import os
import sys

HEADER = ["run", "exit", "records/sched", "ok", "exact", "client cached", "sum inst hits",
          "equal", "server hit%", "one-cache ideal%", "routed ideal%", "inst shares (rec%)",
          "rec vs inst count", "cached per inst equal", "unplaced", "split", "sessions on 1 inst", "router's count", "s"]


def counters(path):
    out = {}
    try:
        for line in open(path):
            i, h, s = line.split()
            out[int(i)] = (int(h), int(s))
    except OSError:
        pass
    return out


def port_of_url(u):
    return int(u.replace("/metrics", "").rstrip("/").rsplit(":", 1)[1].split("/")[0])


def main():
    if sys.argv[1:] == ["--header"]:
        print("\t".join(HEADER))
        return
    d, name, rc = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        s = json.load(open(os.path.join(d, "summary.json")))
    except OSError as e:
        print(f"{name}\texit {rc}: no summary ({e})")
        return
    st, ex, c = s["status"], s["token_exactness"], s["cache"]
    srv = s.get("server") or {}
    pl = srv.get("placement") or {}
    insts = srv.get("instances") or []
    before, after = counters(os.path.join(d, "before.txt")), counters(os.path.join(d, "after.txt"))
    # Instance i of the summary is the scraped URL; the counters are keyed 1..K by port order.
    # A counter that went down is an instance restarted during the run: what it counted
    # before is gone, so its delta (and the sum) is only what it counted since.
    deltas, restarted = {}, []
    for k in sorted(after):
        if k in before and after[k][0] >= 0 and before[k][0] >= 0:
            if after[k][1] < before[k][1]:
                restarted.append(k)
                deltas[k] = after[k]
            else:
                deltas[k] = (after[k][0] - before[k][0], after[k][1] - before[k][1])
    if not after and insts:
        # No counters read by the script (llm-sim): the summary's own deltas, by port order.
        order = sorted(range(len(insts)), key=lambda i: port_of_url(insts[i]["url"]))
        for k, i in enumerate(order, start=1):
            x = insts[i]
            if x.get("requests") is not None:
                deltas[k] = (int(x.get("prefix_hits") or 0), int(x["requests"]))
    hits = sum(h for h, _ in deltas.values()) if deltas else None
    recs = [json.loads(l) for l in open(os.path.join(d, "records.jsonl"))] if os.path.exists(os.path.join(d, "records.jsonl")) else []
    # Records per instance (their KV placement, else the response's header) by URL port.
    def port_of(u):
        return int(u.rstrip("/").rsplit(":", 1)[1].split("/")[0])
    url_of = {i: x["url"].replace("/metrics", "") for i, x in enumerate(insts)}
    by_port, cached_by_port, placed_ok = {}, {}, 0
    sessions = {}
    for r in recs:
        if r.get("status") != "ok":
            continue
        k = r.get("kv_placement")
        port = None
        if k:
            port = port_of(k["url"])
        elif r.get("served_by") and r["served_by"].get("port"):
            port = r["served_by"]["port"]
        if port is None:
            continue
        placed_ok += 1
        if r.get("session_id") is not None:
            sessions.setdefault(r["session_id"], set()).add(port)
        by_port[port] = by_port.get(port, 0) + 1
        cached_by_port[port] = cached_by_port.get(port, 0) + (r.get("cached_tokens") or 0)
    base = min(by_port) - 1 if by_port else 0
    inst_ports = sorted(port_of(u) for u in url_of.values()) if url_of else sorted(by_port)
    share_list = [100 * by_port.get(p, 0) / max(placed_ok, 1) for p in inst_ports]
    shares = "/".join(f"{x:.1f}" for x in share_list)
    if len(share_list) > 6:
        shares = f"{len(share_list)} instances, {min(share_list):.1f}-{max(share_list):.1f}"
    # Each instance's own success count, by its port (counters are keyed 1..K = BASE+1..).
    vs, diff, cached_eq = [], 0, []
    for p in inst_ports:
        k = p - (inst_ports[0] - 1)
        own = deltas.get(k, (None, None))
        vs.append(f"{by_port.get(p, 0)}/{own[1]}" + ("(restarted)" if k in restarted else ""))
        if own[1] is not None and k not in restarted:
            diff += abs(by_port.get(p, 0) - own[1])
            cached_eq.append(cached_by_port.get(p, 0) == own[0])
        elif k in restarted:
            pass
    # The router's own per-worker outcomes (smg_worker_cb_outcomes_total), "port=ok[/failed]".
    rb = {}
    try:
        b = dict(x.split("=") for x in open(os.path.join(d, "router-before.txt")).read().split())
        a = dict(x.split("=") for x in open(os.path.join(d, "router-after.txt")).read().split())
        for k in a:
            w, o = k.split("|")
            rb.setdefault(w, {})[o] = int(a[k]) - int(b.get(k, 0))
    except (OSError, ValueError):
        pass
    router = " ".join(
        f"{w.rsplit(':', 1)[1]}={v.get('success', 0)}" + (f"/{v['failure']}fail" if v.get("failure") else "")
        for w, v in sorted(rb.items()))
    pct = lambda x: "n/a" if x is None else f"{100 * x:.2f}"
    cached = c["cached_tokens"]
    kv = pl.get("kv_events") or {}
    row = [
        name, rc, f"{st['total']}/{s['scheduled']}", st["ok"],
        f"{ex['exact']}/{ex['with_usage']}", cached, hits,
        "yes" if cached == hits else (f"n/a (instance {','.join(map(str, restarted))} restarted)" if restarted else "NO"),
        pct((srv.get("cluster") or {}).get("prefix_hit_ratio")),
        pct(c.get("ideal_hit_ratio_server_blocks") or c.get("ideal_hit_ratio")),
        pct(pl.get("routed_ideal_hit_ratio_server_blocks") or pl.get("routed_ideal_hit_ratio")),
        shares, (" ".join(vs) if len(vs) <= 6 else f"{len(vs)} instances") + f" (off {diff})",
        "all" if cached_eq and all(cached_eq) else f"{sum(cached_eq)}/{len(cached_eq)}",
        pl.get("unplaced", "n/a"), kv.get("split_votes", "-"),
        f"{sum(len(v) == 1 for v in sessions.values())}/{len(sessions)}",
        router or "-",
        open(os.path.join(d, "seconds.txt")).read().strip() if os.path.exists(os.path.join(d, "seconds.txt")) else "-",
    ]
    print("\t".join(str(x) for x in row))


if __name__ == "__main__":
    main()
