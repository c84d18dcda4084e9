#!/usr/bin/env python3
"""Stream a large synthetic OpenAI-format request log to standard output, for measuring
`request-sim convert`'s memory on logs of many GB without keeping one on disk.

    scripts/make_big_log.py --requests 1500000 | request-sim convert - -o trace.jsonl ...

Every request is a turn of a multi-turn conversation: a system prompt (one of --apps, so
prefixes are shared across conversations as in a real deployment), then the conversation so far
and a new user message of fresh words; its response is the next assistant message, with
`usage.completion_tokens`. Conversations start as a Poisson process (--rate per second), last 1 to
--max-turns turns, and send each turn a think time (3..20 s) after the previous one. The words
are drawn from a vocabulary of made-up words (--vocab of them; random sequences of them, so
--vocab 2000 is enough for distinct text and lets the tokenizer cache words), so the text is distinct and the
maps of `convert` (distinct blocks, sessions) grow as on a real log. Only the live conversations
are kept, so the generator runs in constant memory. Seeded: the same arguments give the same log.

--progress FILE: every 10,000 requests, `REQUESTS BYTES` is written to FILE (for a sampler).
"""

import argparse
import heapq
import json
import random
import sys
from datetime import datetime, timedelta, timezone


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--rate", type=float, default=5.0, help="new conversations per second")
    ap.add_argument("--max-turns", type=int, default=12)
    ap.add_argument("--apps", type=int, default=20, help="distinct system prompts")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--progress", default=None)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(args.vocab)]

    def words(lo, hi):
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))

    apps = [f"You are assistant {i} of a company. " + words(60, 200) for i in range(args.apps)]
    start = datetime(2025, 3, 1, tzinfo=timezone.utc)
    out = sys.stdout
    progress = open(args.progress, "w") if args.progress else None
    heap = []  # (time_s, seq, messages, turns_left)
    seq = 0
    t_next = 0.0
    written = 0
    nbytes = 0
    while written < args.requests:
        # The next event: a new conversation or a live one's next turn, whichever is first.
        if not heap or t_next <= heap[0][0]:
            msgs = [{"role": "system", "content": rng.choice(apps)}]
            item = (t_next, seq, msgs, rng.randint(1, args.max_turns))
            t_next += rng.expovariate(args.rate)
        else:
            item = heapq.heappop(heap)
        seq += 1
        t, _, msgs, left = item
        msgs.append({"role": "user", "content": words(8, 60)})
        reply = words(5, 80)
        row = {
            "timestamp": (start + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "request": {"model": "m", "messages": msgs},
            "response": {
                "choices": [{"message": {"role": "assistant", "content": reply}}],
                "usage": {"completion_tokens": reply.count(" ") + 1},
            },
        }
        line = json.dumps(row, separators=(",", ":")) + "\n"
        out.write(line)
        written += 1
        nbytes += len(line)
        if progress and written % 10000 == 0:
            progress.seek(0)
            progress.write(f"{written} {nbytes}\n")
            progress.flush()
        if left > 1:
            msgs.append({"role": "assistant", "content": reply})
            heapq.heappush(heap, (t + rng.uniform(3, 20), seq, msgs, left - 1))
    out.flush()
    if progress:
        progress.seek(0)
        progress.write(f"{written} {nbytes}\n")
        progress.close()
    print(f"make_big_log.py: {written} requests, {nbytes} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
