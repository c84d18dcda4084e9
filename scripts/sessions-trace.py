#!/usr/bin/env python3
"""A multi-turn session trace for cluster checks (scripts/cluster.sh, docs/cluster.md).

Rows are request-sim's generic JSONL (session_id, timestamp ms, input_length, output_length,
hash_ids of BLOCK-token blocks; read it with --block-size BLOCK). Every session opens with the
same system prompt (SYSTEM blocks), then a first user turn; each later turn is the whole
history (the previous prompt, one block standing for the previous answer, and the new user
turn). So a router that keeps a session on one instance finds its history cached there, and
one that spreads a session's turns (round-robin) does not: the policies differ.

    scripts/sessions-trace.py OUT.jsonl [--sessions 24] [--turns 6] [--block 64] [--seed 1]
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--sessions", type=int, default=24)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--system", type=int, default=4, help="system prompt blocks (shared)")
    ap.add_argument("--first", default="3,8", help="blocks of the first user turn: lo,hi")
    ap.add_argument("--new", default="2,6", help="blocks a later turn adds: lo,hi")
    ap.add_argument("--output", type=int, default=16, help="output tokens per turn")
    ap.add_argument("--think", default="6,12", help="seconds between turns: lo,hi")
    ap.add_argument("--spread", type=float, default=20.0, help="session starts over this many s")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lo_hi = lambda s: tuple(float(x) for x in s.split(","))
    first, new, think = lo_hi(a.first), lo_hi(a.new), lo_hi(a.think)
    next_id = [a.system]
    system = list(range(a.system))

    def fresh(n):
        ids = list(range(next_id[0], next_id[0] + n))
        next_id[0] += n
        return ids

    rows = []
    for s in range(a.sessions):
        t = rng.uniform(0, a.spread)
        ids = system + fresh(rng.randint(int(first[0]), int(first[1])))
        for turn in range(a.turns):
            if turn > 0:
                ids = ids + fresh(1) + fresh(rng.randint(int(new[0]), int(new[1])))
                t += rng.uniform(think[0], think[1])
            rows.append({
                "session_id": f"s{s}",
                "timestamp": round(t * 1000, 3),
                "input_length": len(ids) * a.block,
                "output_length": a.output,
                "hash_ids": ids,
            })
    rows.sort(key=lambda r: r["timestamp"])
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
