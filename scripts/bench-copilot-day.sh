#!/usr/bin/env bash
# One day of the Copilot trace's real shape, in flat memory (issue 41):
#
#   scripts/bench-copilot-day.sh
#
# 1. generates a day-sized partition with scripts/gen-copilot.py --day (40,000 sessions,
#    ~1.4M calls, prompts of ~64k tokens on average, one seeded generator per shard in JOBS
#    processes) under DAY_DIR, unless it is there;
# 2. `request-sim analyze` on it under GNU time (peak RSS, wall time);
# 3. a TIME_S-second replay with `--users USERS` against a separate llm-sim process on
#    127.0.0.1:PORT (`--preset fast`, block size 64), under GNU time, and from its records the
#    release latency of the requests released after their predecessor (sent − (predecessor's
#    completion + client gap), no joins: the measure of scripts/bench-agents.sh).
# Prints the numbers docs/performance.md quotes. Loopback only; bounded by TIME_S and timeout.
#
# Environment (defaults in brackets): DAY_DIR [/work/tmp-copilot/day]  JOBS [2]  USERS [200]
#   TIME_S [60]  PORT [19150]  BIN_DIR [$CARGO_TARGET_DIR/release or target/release]
#   NO_BUILD [0]  ANALYZE [1] (0: skip step 2)  OUT [bench-results/copilot-day-<UTC time>]
#   KEEP_DAY [1] (0: delete the partition at the end)
# Needs: jq, awk, python3, GNU time (/usr/bin/time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DAY_DIR="${DAY_DIR:-/work/tmp-copilot/day}"
JOBS="${JOBS:-2}"
USERS="${USERS:-200}"
TIME_S="${TIME_S:-60}"
PORT="${PORT:-19150}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/copilot-day-$(date -u +%Y%m%d-%H%M%S)}"
for tool in jq awk python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench-copilot-day.sh: $tool not found" >&2; exit 1; }
done
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-copilot-day.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"
PART="$DAY_DIR/date=2026-06-01"
peak() { awk -F': ' '/Maximum resident/ { printf "%.0f MB", $2 / 1024 }' "$1"; }
wall() { awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$1"; }

echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (uncommitted changes)'); cores: $(nproc)"
if [[ ! -f "$PART/manifest.json" ]]; then
    /usr/bin/time -v -o "$OUT/gen.time" python3 scripts/gen-copilot.py --day --jobs "$JOBS" \
        --out "$DAY_DIR"
    echo "generate: wall $(wall "$OUT/gen.time"), peak RSS $(peak "$OUT/gen.time") (per process)"
fi
echo "partition: $(ls "$PART" | grep -c '^shard-') shards, $(du -sh "$PART" | cut -f1) gzip"

if [[ "${ANALYZE:-1}" != 0 ]]; then
    /usr/bin/time -v -o "$OUT/analyze.time" "$RS" analyze "$PART" --json >"$OUT/analysis.json" \
        2>"$OUT/analyze.log"
    echo "analyze: wall $(wall "$OUT/analyze.time"), peak RSS $(peak "$OUT/analyze.time")"
    jq -c '{conversations, requests, mean_input: .input_length.mean, ideal_hit_ratio,
        production: (.production | {cached_share, rebuilt_minus_production_pp, segments_short,
        segments_over, not_success})}' "$OUT/analysis.json"
fi

"$SIM" --host 127.0.0.1 --port "$PORT" --preset fast --block-size 64 2>"$OUT/llm-sim.log" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do
    grep -q 'listening on' "$OUT/llm-sim.log" && break
    sleep 0.1
done
REC="$OUT/records.jsonl"
/usr/bin/time -v -o "$OUT/replay.time" timeout $((TIME_S + 300)) "$RS" replay \
    --endpoint "http://127.0.0.1:$PORT" --dataset-path "$PART" --users "$USERS" \
    --time-in-secs "$TIME_S" --seed 1 --quiet -o "$REC" >"$OUT/console.txt" 2>"$OUT/replay.log"
echo "replay --users $USERS --time-in-secs $TIME_S: wall $(wall "$OUT/replay.time"), peak RSS $(peak "$OUT/replay.time")"
pct() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit }
    i50 = int(0.50 * NR); if (i50 < 1) i50 = 1; i99 = int(0.99 * NR + 0.999); if (i99 > NR) i99 = NR
    printf "n=%d p50 %.3f p99 %.3f max %.3f ms\n", NR, v[i50], v[i99], v[NR] }'; }
echo "records: $(wc -l < "$REC") (scheduled: $(jq '.run.scheduled' "$REC.summary.json")), statuses: $(jq -c '.status' "$REC.summary.json")"
echo -n "release latency (sent - predecessor done - gap, no joins): "
jq -s 'INDEX(.index|tostring) as $by
    | .[] | select(.parent_index != null and .sent_ms != null and .joins == null and .think_ms != null)
    | $by[.parent_index|tostring] as $p
    | select($p.sent_ms != null and $p.done_ms != null)
    | (.sent_ms - ($p.sent_ms + $p.done_ms) - .think_ms)' "$REC" | pct
echo -n "drift, clock-released (conversation starts): "
jq 'select(.think_ms == null and .drift_ms != null) | .drift_ms' "$REC" | pct
echo "agents: $(jq -c '.agents | {conversations, subagents_spawned, trace_results, requests_not_sent, server_hit_ratio, ideal_hit_ratio}' "$REC.summary.json")"
if [[ "${KEEP_DAY:-1}" == 0 ]]; then
    rm -rf "$DAY_DIR"
fi
echo "results in $OUT"
