#!/usr/bin/env python3
"""Generate a Copilot coding-agent trace partition in the exact shape of GitHub's June 2026
release (Azure Public Dataset, analysis/GitHubCopilotCodingAgents/schema.json): a
date=YYYY-MM-DD/ directory of shard-NNNN.jsonl[.gz] files, one session per line, and a
manifest.json. Seeded: the same arguments write the same bytes.

Each session has turns of LLM calls. A call after the first of its turn starts exactly when its
predecessor ended plus the duration of the tool batch that predecessor asked for (the batch's
request_id is its message_id). A call's prompt segments are its predecessor's plus the new ones
(the assistant's answer and the tool results); a prompt past --compact-at tokens is compacted
(the next prompt is the system segment, a summary and the user's message). Some calls run in
parallel with a call of the main chain (same prefix plus a small segment, no tool batch); some
turns end in a UserCancel call; some prompts carry template tokens the segments do not count.

  scripts/gen-copilot.py --sessions 12 --shard-size 8 --gzip-from 1 --parallel 0.15 \
      --max-turns 3 --seed 7 --out request-sim/tests/data/copilot   # the test fixture
"""

import argparse
import gzip
import io
import json
import os
import random
from datetime import datetime, timedelta, timezone

# Model label -> (share of sessions, system segment tokens).
MODELS = {
    "Model A": (0.40, 1931),
    "Model B": (0.25, 2600),
    "Model C": (0.15, 1500),
    "Model D": (0.12, 3077),
    "Model E": (0.08, 1200),
}
TOOLS = ["read_file", "run_in_terminal", "grep_search", "apply_patch", "custom_tool_1"]


def iso(ms):
    t = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def hexid(rng):
    return "%032x" % rng.getrandbits(128)


class Prompt:
    """The segments of the main chain's next prompt."""

    def __init__(self, system):
        self.segments = [("System", "system", system)]

    def add(self, kind, role, n):
        self.segments.append((kind, role, n))

    def tokens(self):
        return sum(n for _, _, n in self.segments)

    def metadata(self, extra=()):
        segs = self.segments + list(extra)
        return [
            {"type": k, "role": r, "sequenceId": i, "token_len": n}
            for i, (k, r, n) in enumerate(segs)
        ]


def call(rng, at_ms, model, initiator, segments, prompt, cached, result="Success"):
    completion = rng.randint(20, 400)
    duration = rng.randint(400, 6000)
    return {
        "message_id": hexid(rng),
        "timestamp": iso(at_ms),
        "duration_ms": float(duration),
        "initiator_type": initiator,
        "model": model,
        "result": result,
        "status_code": "OK" if result == "Success" else "Canceled",
        "tokens": {
            "total": prompt + completion,
            "prompt": prompt,
            "completion": completion,
            "cached": cached,
            "cached_pct": round(100.0 * cached / prompt, 2),
        },
        "message_metadata": segments,
    }


def batch(rng, at_ms, request_id):
    n = rng.randint(1, 3)
    calls = [
        {
            "name": rng.choice(TOOLS),
            "status": 1 if rng.random() < 0.9 else 2,
            "duration_ms": float(rng.randint(50, 4000)),
        }
        for _ in range(n)
    ]
    duration = max(c["duration_ms"] for c in calls) + rng.randint(0, 300)
    return {
        "timestamp": iso(at_ms),
        "duration_ms": float(duration),
        "auto_continue": True,
        "result": "Success",
        "request_id": request_id,
        "function_calls": calls,
    }


def turn(rng, args, model, prompt, t_ms, last_prompt):
    """One turn from t_ms: its calls and batches, the time it ends and its last prompt."""
    calls, batches = [], []
    prompt.add("UserMessage", "user", rng.randint(20, 300))
    n = rng.randint(1, args.max_calls)
    for k in range(n):
        template = rng.choice([0, 0, 3, 7])  # tokens the segments do not count
        tokens = prompt.tokens() + template
        cached = last_prompt if last_prompt <= tokens else MODELS[model][1]
        cancel = k == n - 1 and rng.random() < args.cancel
        c = call(rng, t_ms, model, "user" if k == 0 else "agent", prompt.metadata(),
                 tokens, min(cached, tokens), "UserCancel" if cancel else "Success")
        calls.append(c)
        if rng.random() < args.parallel:
            extra = [("SubTask", "user", rng.randint(5, 40))]
            p_tokens = prompt.tokens() + extra[0][2]
            calls.append(call(rng, t_ms + rng.randint(1, 200), model, "agent",
                              prompt.metadata(extra), p_tokens, min(prompt.tokens(), p_tokens)))
        last_prompt = tokens
        end = t_ms + int(c["duration_ms"])
        if k == n - 1 or cancel:
            return calls, batches, end, last_prompt
        b = batch(rng, end, c["message_id"])
        batches.append(b)
        t_ms = end + int(b["duration_ms"])
        prompt.add("AssistantMessage", "assistant", c["tokens"]["completion"])
        prompt.add("ToolResult", "user", rng.randint(100, 1500))
        if prompt.tokens() > args.compact_at:
            system = MODELS[model][1]
            prompt.segments = [("System", "system", system), ("Summary", "user", rng.randint(300, 900))]
    return calls, batches, t_ms, last_prompt


def session(rng, args, day_ms):
    names = list(MODELS)
    model = rng.choices(names, weights=[MODELS[m][0] for m in names])[0]
    prompt = Prompt(MODELS[model][1])
    t_ms = day_ms + rng.randint(0, 86_000_000)
    turns, last_prompt = [], 0
    for _ in range(rng.randint(1, args.max_turns)):
        calls, batches, end, last_prompt = turn(rng, args, model, prompt, t_ms, last_prompt)
        turns.append({"turn_id": hexid(rng), "llm_calls": calls, "tool_batches": batches})
        t_ms = end + rng.randint(5_000, 120_000)  # the person
    return {"session_id": hexid(rng), "date": args.date, "turns": turns}


def write_shard(path, lines, gz):
    data = "".join(json.dumps(s, separators=(",", ":")) + "\n" for s in lines).encode()
    if gz:
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as f:
            f.write(data)
        data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--date", default="2026-06-01")
    ap.add_argument("--out", required=True, help="parent of the date=... directory")
    ap.add_argument("--shard-size", type=int, default=500, help="sessions per shard")
    ap.add_argument("--gzip-from", type=int, default=0,
                    help="shards from this index on are gzipped (default: all)")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-calls", type=int, default=6)
    ap.add_argument("--parallel", type=float, default=0.1)
    ap.add_argument("--cancel", type=float, default=0.15)
    ap.add_argument("--compact-at", type=int, default=9000)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    day = datetime.strptime(args.date, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    day_ms = int(day.timestamp() * 1000)
    out = os.path.join(args.out, f"date={args.date}")
    os.makedirs(out, exist_ok=True)
    sessions = [session(rng, args, day_ms) for _ in range(args.sessions)]
    shards = []
    for i in range(0, len(sessions), args.shard_size):
        k = i // args.shard_size
        gz = k >= args.gzip_from
        name = f"shard-{k:04d}.jsonl" + (".gz" if gz else "")
        chunk = sessions[i:i + args.shard_size]
        size = write_shard(os.path.join(out, name), chunk, gz)
        shards.append({"file": name, "sessions": len(chunk), "bytes": size})
    manifest = {"date": args.date, "sessions": len(sessions), "shards": shards}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
