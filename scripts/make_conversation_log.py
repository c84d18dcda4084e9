#!/usr/bin/env python3
"""Make an OpenAI-format request log from a real conversation dataset, for `request-sim convert`.

The conversations are Google's Taskmaster-4 (2024) dialogs (github.com/google-research-datasets/
Taskmaster, `TM-4-2024/data/data_*.json`, CC BY 4.0; not committed here: pass the files). Every
user utterance of a dialog becomes one chat request whose messages are a system prompt for the
dialog's vertical, the dialog so far, and that utterance; the next assistant utterance is its
response. Sessions start as a Poisson process (`--rate` sessions/s); a turn is sent a think time
(uniform 3..20 s) after the previous turn's reply. Seeded, so the same files give the same log.

    scripts/make_conversation_log.py TM-4-2024/data/data_0{0,1,2,3}.json -o log.jsonl

One JSON object per line, in time order:
    {"timestamp": "2024-05-10T12:00:03.250Z", "request": {"model": ..., "messages": [...]},
     "response": {"id": ..., "choices": [{"message": {"role": "assistant", "content": ...}}]}}

With `--usage` every response also carries `usage.completion_tokens`, a word count (a stand-in:
the real count is the tokenizer's; without it `convert` counts the response text itself).
"""

import argparse
import heapq
import json
import random
import sys

SYSTEM = (
    "You are a friendly voice assistant that takes {vertical} orders for a chain of shops. "
    "Confirm every item, size and modification back to the customer, answer questions about "
    "the menu, prices and waiting times, and keep every answer short enough to be read aloud."
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dialogs", nargs="+", help="Taskmaster-4 data_*.json files")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--rate", type=float, default=1.0, help="new sessions per second")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--start", default="2024-05-10T12:00:00", help="UTC start (ISO 8601)")
    ap.add_argument("--usage", action="store_true", help="add usage.completion_tokens (word count)")
    ap.add_argument("--max-sessions", type=int, default=None)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    dialogs = []
    for path in args.dialogs:
        with open(path, encoding="utf-8") as f:
            dialogs.extend(json.load(f))
    if args.max_sessions:
        dialogs = dialogs[: args.max_sessions]

    from datetime import datetime, timedelta, timezone

    start = datetime.fromisoformat(args.start).replace(tzinfo=timezone.utc)
    events = []  # (time_s, seq, row)
    t = 0.0
    seq = 0
    for d in dialogs:
        t += rng.expovariate(args.rate)
        messages = [{"role": "system", "content": SYSTEM.format(vertical=d.get("vertical", "coffee").lower())}]
        turn_t = t
        utts = [u for u in d["utterances"] if u.get("text")]
        for i, u in enumerate(utts):
            if u["speaker"] != "user":
                continue
            messages.append({"role": "user", "content": u["text"]})
            reply = next((v["text"] for v in utts[i + 1 :] if v["speaker"] == "assistant"), None)
            if reply is None:
                break
            row = {
                "timestamp": (start + timedelta(seconds=turn_t)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "request": {"model": "qwen3", "messages": list(messages)},
                "response": {
                    "id": f"chatcmpl-{seq}",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                },
            }
            if args.usage:
                row["response"]["usage"] = {"completion_tokens": len(reply.split())}
            events.append((turn_t, seq, row))
            seq += 1
            messages.append({"role": "assistant", "content": reply})
            # The reply takes ~20 ms per word, then the user thinks.
            turn_t += 0.02 * len(reply.split()) + rng.uniform(3.0, 20.0)
    events.sort(key=lambda e: (e[0], e[1]))
    with open(args.output, "w", encoding="utf-8") as out:
        for _, _, row in events:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    sessions = len(dialogs)
    print(f"wrote {len(events)} requests of {sessions} dialogs to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
