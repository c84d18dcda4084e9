#!/usr/bin/env python3
"""Checks an agent-corpus replay from its records and summary (issue 41's "Done when").

    scripts/check-agent-run.py RECORDS SUMMARY [--trace DIR] [--model-map MAP]
                               [--max-idle-gap S] [--scale-factor X] [--max-pp 2]

Checks, each printed with its numbers, exit status 1 if any fails:
  1. records = scheduled: one record per scheduled index (0..scheduled-1, each once), and the
     summary's counts_add_up.
  2. no call before its predecessor's completion + its client gap: for every record with a
     parent, sent_ms >= parent's sent_ms + done_ms + think_ms (to 0.01 ms, the records' µs
     rounding); with --trace (a Copilot partition), every `tool_time` gap is one of its
     session's tool-batch durations (min(duration, --max-idle-gap) / --scale-factor).
  3. parallel calls overlap: every parallel call (a subagent of the Copilot reader) that ended
     ok ran, at least in part, while another call of its conversation was in flight, or was
     sent on time (its predecessor's end + its gap, within 1 ms) when every other call of its
     conversation had already ended (the server answered the sibling faster than production
     did); a parallel call held back past its time fails.
  4. prompt tokens exact: every ok record's prompt_tokens == input_length; with --trace, each
     session's input lengths are its calls' `tokens.prompt` (as multisets).
  5. per-model rows add up: each list of the summary's `models` sums to the totals; with
     --model-map, every record's `model` is its `trace_model` mapped.
  6. server hit ratio within --max-pp (2) points of the trace-ideal for the routing the run got
     (agents.routed_ideal_hit_ratio).
"""

import argparse
import collections
import glob
import gzip
import json
import os
import sys


def load_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def trace_sessions(d):
    """session id -> list of calls and of tool-batch durations, from a Copilot partition."""
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "shard-*.jsonl*"))):
        op = gzip.open if p.endswith(".gz") else open
        with op(p, "rt") as f:
            for line in f:
                if not line.strip():
                    continue
                s = json.loads(line)
                calls, batches = [], []
                for t in s.get("turns", []):
                    calls += t.get("llm_calls", [])
                    batches += [b["duration_ms"] for b in t.get("tool_batches", [])]
                out[s["session_id"]] = (calls, batches)
    return out


def parse_map(spec):
    m, default = {}, None
    for e in spec.split(","):
        k, v = [x.strip() for x in e.rsplit("=", 1)]
        if k == "*":
            default = v
        else:
            m[k] = v
    return m, default


class Checks:
    def __init__(self):
        self.failed = 0

    def report(self, name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        self.failed += 0 if ok else 1


def end_ms(r):
    d = r.get("done_ms") if r.get("done_ms") is not None else r.get("e2e_ms")
    return None if r.get("sent_ms") is None or d is None else r["sent_ms"] + d


def check_counts(c, recs, s):
    idx = collections.Counter(r["index"] for r in recs)
    sched = s["scheduled"]
    ok = (
        len(recs) == sched
        and all(idx[i] == 1 for i in range(sched))
        and s.get("counts_add_up") is True
    )
    c.report("records = scheduled", ok, f"{len(recs)} records, {sched} scheduled, "
             f"{len(idx)} distinct indexes, counts_add_up {s.get('counts_add_up')}")


def check_order(c, recs, by_index, sessions, cap_ms, scale):
    late, worst, checked, bad_tool = 0, float("inf"), 0, 0
    tool_checked = 0
    for r in recs:
        p = r.get("parent_index")
        if p is None or r.get("sent_ms") is None:
            continue
        parent = by_index[p]
        pend = end_ms(parent)
        if pend is None:
            continue
        gap = r.get("think_ms") or 0.0
        slack = r["sent_ms"] - (pend + gap)
        worst = min(worst, slack)
        checked += 1
        late += slack < -0.01
        if sessions is not None and r.get("gap_rule") == "tool_time":
            tool_checked += 1
            batches = sessions.get(r.get("conversation", "").split("#")[0], (None, []))[1]
            want = [min(b, cap_ms) / scale for b in batches]
            if not any(abs(gap - w) < 0.01 for w in want):
                bad_tool += 1
    c.report("no call before its predecessor's completion + gap", late == 0,
             f"{checked} released calls, {late} early, min slack {worst:.3f} ms")
    if sessions is not None:
        c.report("tool gaps are the trace's tool-batch durations", bad_tool == 0,
                 f"{tool_checked} tool_time gaps, {bad_tool} not a batch duration of their session")


def check_parallel(c, recs, by_index):
    """A parallel call overlaps another call of its conversation, or was sent on time (its
    predecessor's end + its gap) when nothing of its conversation was in flight: a call the
    server answered faster than production did can end before its sibling starts."""
    by_conv = collections.defaultdict(list)
    for r in recs:
        if r.get("conversation") and end_ms(r) is not None:
            by_conv[r["conversation"]].append(r)
    par, overl, alone, bad = 0, 0, 0, 0
    for conv, rs in by_conv.items():
        for r in rs:
            if r.get("agent") in (None, "main") or r["status"] != "ok":
                continue
            par += 1
            a, b = r["sent_ms"], end_ms(r)
            if any(o is not r and o["sent_ms"] < b and end_ms(o) > a for o in rs):
                overl += 1
                continue
            p = by_index.get(r.get("parent_index"))
            release = end_ms(p) + (r.get("think_ms") or 0.0) if p else a
            if a - release < 1.0:
                alone += 1
            else:
                bad += 1
    c.report("parallel calls overlap", par > 0 and bad == 0,
             f"{par} parallel calls: {overl} ran beside another call of their conversation, "
             f"{alone} were sent on time after every other call of it had ended (the server "
             f"answered faster than the trace), {bad} held back")


def check_prompts(c, recs, sessions):
    okr = [r for r in recs if r["status"] == "ok"]
    exact = sum(1 for r in okr if r.get("prompt_tokens") == r["input_length"])
    c.report("prompt tokens exact (server = intended)", exact == len(okr),
             f"{exact} of {len(okr)} ok records")
    if sessions is None:
        return
    got = collections.defaultdict(list)
    for r in recs:
        got[r.get("conversation", "").split("#")[0]].append(r["input_length"])
    bad = 0
    for sid, lens in got.items():
        calls = sessions.get(sid, ([], []))[0]
        want = sorted(x["tokens"]["prompt"] for x in calls)
        bad += sorted(lens) != want
    c.report("input lengths are the trace's tokens.prompt", bad == 0,
             f"{len(got)} sessions, {bad} differ")


def check_models(c, recs, s, spec):
    m = s.get("models")
    if not m:
        c.report("per-model rows add up", False, "the summary has no `models`")
        return
    tot = {
        "requests": s["status"]["total"], "ok": s["status"]["ok"],
        "errors": sum(s["status"][k] for k in ("http_error", "timeout", "connect_error",
                                                 "protocol_error")),
        "input_tokens": s["total_input_tokens"], "output_tokens": s["total_output_tokens"],
        "prompt_tokens": s["cache"]["prompt_tokens"], "cached_tokens": s["cache"]["cached_tokens"],
    }
    for which in ("served", "trace"):
        rows = m[which]
        sums = {k: sum(r[k] for r in rows) for k in tot}
        c.report(f"per-model rows add up ({which}: {len(rows)} rows)", sums == tot,
                 ", ".join(f"{k} {sums[k]}/{tot[k]}" for k in tot))
    if spec:
        mp, default = parse_map(spec)
        wrong = sum(1 for r in recs
                    if r.get("model") != mp.get(r.get("trace_model"), default))
        sent = collections.Counter(r.get("model") for r in recs)
        c.report("models sent are the mapped ones", wrong == 0,
                 f"{wrong} wrong; sent {dict(sorted(sent.items()))}")


def check_hits(c, s, max_pp):
    a = s.get("agents") or {}
    srv, ideal = a.get("server_hit_ratio"), a.get("routed_ideal_hit_ratio")
    if srv is None or ideal is None:
        c.report("server hit ratio vs ideal for the routing", False, f"missing: {srv} / {ideal}")
        return
    d = (srv - ideal) * 100
    c.report(f"server hit ratio within {max_pp} pp of the ideal for the routing",
             abs(d) <= max_pp,
             f"server {srv*100:.2f}%, ideal for the routing {ideal*100:.2f}% "
             f"({a.get('instances_served')} instances), diff {d:+.2f} pp; "
             f"trace-ideal (one cache) {a.get('ideal_hit_ratio', 0)*100:.2f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records")
    ap.add_argument("summary")
    ap.add_argument("--trace", help="the Copilot partition replayed (date=... directory)")
    ap.add_argument("--model-map", help="the inline map given to the replay")
    ap.add_argument("--max-idle-gap", type=float, default=None, help="seconds")
    ap.add_argument("--scale-factor", type=float, default=1.0)
    ap.add_argument("--max-pp", type=float, default=2.0)
    a = ap.parse_args()
    recs = load_records(a.records)
    with open(a.summary) as f:
        s = json.load(f)
    by_index = {r["index"]: r for r in recs}
    sessions = trace_sessions(a.trace) if a.trace else None
    cap_ms = a.max_idle_gap * 1e3 if a.max_idle_gap is not None else float("inf")
    c = Checks()
    check_counts(c, recs, s)
    check_order(c, recs, by_index, sessions, cap_ms, a.scale_factor)
    check_parallel(c, recs, by_index)
    check_prompts(c, recs, sessions)
    check_models(c, recs, s, a.model_map)
    check_hits(c, s, a.max_pp)
    st = collections.Counter(r["status"] for r in recs)
    print(f"records by status: {dict(sorted(st.items()))}")
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
