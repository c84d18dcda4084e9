#!/usr/bin/env python3
"""Compares request-sim's records of a streamed replay with what scripts/stream-tap.py saw.

    split-check.py NAME RECORDS.jsonl TAP.jsonl TRACE.jsonl [BUDGET_RULE]

A record is matched with what the tap saw by its trace row (`line`): the tap logs the first 60
characters of each request's last message, and TRACE (a `messages` trace whose rows have
distinct last messages) gives each line's. Prints one tab-separated row:
    name; records; ok; matched with the tap; split = tap (thinking events, answer events, token
    events all equal); tool calls and argument bytes = tap; thinking events = the rule
    (`budget-1`: the row's `thinking_token_budget` less one, the prompt's token after `<think>`
    counting against the budget; `all`: every output token, with how many fell short because
    vLLM merged tokens into one chunk); TTFA >= TTFT; TTFA = TTFT + the ITL gaps before the
    first event that carried answer text (within 0.01 ms); |(TTFA - TTFT) - the tap's| p50 /
    max (ms: the tap is a Python proxy on the same cores, so this is a sanity check, not an
    oracle); the median TPOT of tool-call answers (from usage).
"""
import collections
import json
import statistics
import sys


def main():
    name, rec_path, tap_path, trace = sys.argv[1:5]
    rule = sys.argv[5] if len(sys.argv) > 5 else ""
    rows = {n: json.loads(line) for n, line in enumerate(open(trace), 1)}
    budgets = {n: (r.get("extra") or {}).get("thinking_token_budget") for n, r in rows.items()}
    keys = {n: r["messages"][-1]["content"][:60] for n, r in rows.items()}
    recs = [json.loads(l) for l in open(rec_path)]
    by_key = {}
    for line in open(tap_path):
        t = json.loads(line)
        if t["path"].endswith(("/completions", "/responses", "/messages")):
            by_key.setdefault(t["key"], t)
    taps = [by_key.get(keys.get(r.get("line"))) for r in recs]
    ok = [r for r in recs if r["status"] == "ok"]
    split_eq = tools_eq = rule_ok = rule_n = ttfa_ge = ttfa_itl = 0
    diffs, tool_tpot, merged = [], [], 0
    for r, t in zip(recs, taps):
        if r["status"] != "ok" or t is None:
            continue
        k = collections.Counter(kind for e in t["events"] for kind in e[1])
        mine = (r.get("reasoning_tokens") or 0, r.get("answer_tokens") or 0, r["chunks"])
        theirs = (k["reasoning"], k["answer"], len(t["events"]))
        split_eq += mine == theirs
        tools_eq += ((r.get("tool_calls") or 0), (r.get("tool_arg_bytes") or 0)) == (
            t["tool_calls"], t["tool_arg_bytes"])
        out = r.get("output_tokens") or 0
        if rule == "all":
            rule_n += 1
            rule_ok += mine[0] == out
            merged += mine[0] < out
        elif rule == "budget-1":
            rule_n += 1
            b = budgets.get(r.get("line"))
            rule_ok += b is not None and mine[0] == b - 1
        if r.get("ttfa_ms") is not None:
            ttfa_ge += r["ttfa_ms"] >= r["ttft_ms"]
            # Token events before the first one that carried answer text, per the tap.
            j = next(i for i, e in enumerate(t["events"]) if "answer" in e[1])
            est = r["ttft_ms"] + sum((r.get("itl_ms") or [])[:j])
            ttfa_itl += abs(est - r["ttfa_ms"]) <= 0.01
            fa = [e[0] for e in t["events"] if "answer" in e[1]]
            if fa and t["events"]:
                diffs.append(abs((r["ttfa_ms"] - r["ttft_ms"]) - (fa[0] - t["events"][0][0])))
        if r.get("tool_calls") and r.get("tpot_ms") is not None:
            tool_tpot.append(r["tpot_ms"])
    with_ttfa = sum(1 for r in ok if r.get("ttfa_ms") is not None)
    row = [
        name, f"{len(recs)}", f"{len(ok)}", f"{sum(t is not None for t in taps)}",
        f"{split_eq}/{len(ok)}", f"{tools_eq}/{len(ok)}",
        f"{rule_ok}/{rule_n}" + (f" ({merged} merged)" if merged else "") if rule_n else "-",
        f"{ttfa_ge}/{with_ttfa}" if with_ttfa else "-",
        f"{ttfa_itl}/{with_ttfa}" if with_ttfa else "-",
        f"{statistics.median(diffs):.3f} / {max(diffs):.3f}" if diffs else "-",
        f"{statistics.median(tool_tpot):.2f}" if tool_tpot else "-",
    ]
    print("\t".join(row))


if __name__ == "__main__":
    main()
