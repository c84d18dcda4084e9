#!/usr/bin/env bash
# Send drift of each API at 100 req/s (issue #26): alternated replays of chat completions,
# OpenAI Responses and Anthropic Messages against one llm-sim (bench.sh's server flags), each
# 1,000 requests of the conversation trace at --scale-factor 33 with the trace's full outputs.
# Prints one row per run (drift p50/p99/max, sends over 1 ms, exactness, records = scheduled,
# client and llm-sim CPU seconds), then where the late sends were: mean drift by position in a
# burst (requests sharing a timestamp) and the worst bursts.
#
#   scripts/bench-apis.sh                 # ROUNDS=3 rounds of the three APIs
#   NO_BUILD=1 BIN_DIR=… APIS="responses messages" ROUNDS=5 NICE=-10 scripts/bench-apis.sh
#
# Loopback only; every run is bounded by --max-requests, --time-in-secs and `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
BIN_DIR="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
TRACE="${TRACE:-/work/shared/traces/mooncake_conversation_trace.jsonl}"
APIS="${APIS:-openai responses messages}"
ROUNDS="${ROUNDS:-3}"
N="${N:-1000}"
SCALE="${SCALE:-33}"
NICE="${NICE:-0}"
PORT="${PORT:-18791}"
[[ "${NO_BUILD:-0}" == 1 ]] || cargo build --release -q -p request-sim -p llm-sim --bins
[[ -f "$TRACE" ]] || { echo "bench-apis.sh: no trace at $TRACE (set TRACE=...)" >&2; exit 1; }
OUT="$(mktemp -d)"
nice -n "$NICE" "$BIN_DIR/llm-sim" --host 127.0.0.1 --port "$PORT" --preset fast \
    --prefill-token-us 0.01 --block-size 512 --max-num-seqs 1024 \
    --max-num-batched-tokens 1048576 --worker-threads 1 2>"$OUT/llm-sim.log" &
SIM=$!
trap 'kill $SIM 2>/dev/null || true; wait $SIM 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done
TCK="$(getconf CLK_TCK)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for api in $APIS; do
        rec="$OUT/$api-$r.jsonl"
        sb=$(awk '{print $14 + $15}' "/proc/$SIM/stat")
        timeout 150 nice -n "$NICE" /usr/bin/time -f '%U %S' -o "$OUT/time" "$BIN_DIR/request-sim" \
            replay --dataset-path "$TRACE" --quiet -o "$rec" --endpoint "http://127.0.0.1:$PORT" \
            --api "$api" --model-name llm-sim --max-requests "$N" --scale-factor "$SCALE" \
            --time-in-secs 90 --grace-secs 10 >"$OUT/out" 2>"$OUT/err" ||
            { echo "run $api $r failed: $(tail -1 "$OUT/err")"; continue; }
        sa=$(awk '{print $14 + $15}' "/proc/$SIM/stat")
        python3 - "$rec" "$api" "$r" "$(cat "$OUT/time")" "$(( sa - sb ))" "$TCK" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + ".summary.json"))
d, e, rd = s["drift"], s["token_exactness"], s["run"].get("dispatch", {})
u, sy = (float(x) for x in sys.argv[4].split())
print(f"{sys.argv[3]:>2} {sys.argv[2]:<9} drift p50 {d['p50_ms']:.3f} p99 {d['p99_ms']:.3f} "
      f"max {d['max_ms']:.3f} >1ms {d['over_1ms']:>3}  dispatcher max late {rd.get('max_late_ms', 0):.3f}  "
      f"exact {e['exact']}/{s['scheduled']} records=scheduled {s['counts_add_up']}  "
      f"cpu client {u + sy:.2f} s, llm-sim {int(sys.argv[5]) / float(sys.argv[6]):.2f} s")
PY
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Where the late sends were, per API over all its runs.
python3 - "$OUT" $APIS <<'PY'
import collections, glob, json, sys
for api in sys.argv[2:]:
    pos, bursts = collections.defaultdict(list), []
    for f in sorted(glob.glob(f"{sys.argv[1]}/{api}-*.jsonl")):
        by = collections.defaultdict(list)
        for line in open(f):
            r = json.loads(line)
            if r.get("drift_ms") is not None:
                by[r["scheduled_ms"]].append(r)
        for g in by.values():
            g.sort(key=lambda r: r["index"])
            for k, r in enumerate(g):
                pos[k].append(r["drift_ms"])
            bursts.append((min(r["drift_ms"] for r in g), max(r["drift_ms"] for r in g), len(g), f.rsplit("-", 1)[1].split(".")[0]))
    if not pos:
        continue
    print(f"{api}: mean drift (ms) by position in a burst: " +
          " ".join(f"{k}:{sum(v) / len(v):.2f}" for k, v in sorted(pos.items()) if k < 16))
    worst = sorted(bursts, key=lambda b: -b[1])[:5]
    print(f"{api}: worst bursts (run: size, first..last drift ms): " +
          ", ".join(f"{b[3]}: {b[2]}, {b[0]:.2f}..{b[1]:.2f}" for b in worst))
PY
rm -rf "$OUT"
