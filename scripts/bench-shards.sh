#!/usr/bin/env bash
# Scale-out on one machine (issue 13): N shard processes replay one slice of a trace against
# one llm-sim with a common --start-at, then the records are merged. Prints one row per shard
# (requests, drift p99/max, clock start and first send relative to the common start, clock
# error), the merge's verdict, whether the merged summary equals the summary of the
# concatenated records, and then the same run with one shard killed mid-run (the merge must
# name the missing indexes and exit non-zero).
#
#   scripts/bench-shards.sh [TRACE]     # default ../shared/traces/mooncake_conversation_trace.jsonl
#
# Environment (defaults in brackets): SHARDS [4], REQUESTS [4000], RATE [400] (total req/s),
# OUTPUT_TOKENS [16] (--max-output-tokens), LEAD_SECS [4] (start-up time before the common
# start), KILL_AFTER [2] (seconds after the start when one shard is killed), BIN_DIR, NO_BUILD,
# OUT. Loopback only; every run is bounded by --max-requests, --time-in-secs and `timeout`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TRACE="${1:-../shared/traces/mooncake_conversation_trace.jsonl}"
SHARDS="${SHARDS:-4}"
REQUESTS="${REQUESTS:-4000}"
RATE="${RATE:-400}"
OUTPUT_TOKENS="${OUTPUT_TOKENS:-16}"
LEAD_SECS="${LEAD_SECS:-4}"
KILL_AFTER="${KILL_AFTER:-2}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/shards-$(date -u +%Y%m%d-%H%M%S)}"
for tool in jq awk; do command -v "$tool" >/dev/null || { echo "bench-shards.sh: $tool not found" >&2; exit 1; }; done
[[ -f "$TRACE" ]] || { echo "bench-shards.sh: trace $TRACE not found" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"; SIM="$BIN_DIR/llm-sim"
mkdir -p "$OUT"

SIM_LOG="$OUT/llm-sim.log"
"$SIM" --host 127.0.0.1 --port 0 --preset fast --prefill-token-us 0.01 --block-size 512 \
    --max-num-seqs 1024 --max-num-batched-tokens 1048576 2>"$SIM_LOG" &
SIM_PID=$!
trap 'kill $SIM_PID 2>/dev/null || true; wait $SIM_PID 2>/dev/null || true' EXIT
BASE=""
for _ in $(seq 200); do
    BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)"
    [[ -n "$BASE" ]] && break
    sleep 0.05
done
[[ -n "$BASE" ]] || { echo "bench-shards.sh: llm-sim did not start" >&2; cat "$SIM_LOG" >&2; exit 1; }

# Scale so that the slice's REQUESTS are offered at RATE in total.
span=$(awk -v n="$REQUESTS" 'NR == n { match($0, /"timestamp": *[0-9.]+/); s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s; exit }' "$TRACE")
scale=$(awk -v n="$REQUESTS" -v span="$span" -v r="$RATE" 'BEGIN { printf "%.4f", (span / 1000) * r / (n - 1) }')
limit=$(awk -v n="$REQUESTS" -v r="$RATE" 'BEGIN { printf "%d", n / r * 3 + 20 }')

# run_shards DIR [KILL_SHARD]: all shards with one common start; KILL_SHARD is killed
# KILL_AFTER seconds after the start.
run_shards() {
    local dir=$1 kill_k=${2:-}
    mkdir -p "$dir"
    local start
    start=$(awk -v l="$LEAD_SECS" 'BEGIN { srand(); printf "%.3f", srand() + l }')
    local pids=()
    for k in $(seq 0 $((SHARDS - 1))); do
        timeout $((limit + LEAD_SECS + 30)) "$RS" replay --endpoint "$BASE" --dataset-path "$TRACE" \
            --model-name llm-sim --chat-overhead 0 --max-requests "$REQUESTS" \
            --scale-factor "$scale" --max-output-tokens "$OUTPUT_TOKENS" --time-in-secs "$limit" \
            --shard "$k/$SHARDS" --seed 1 --start-at "$start" --quiet \
            --output-path "$dir/shard-$k.jsonl" >"$dir/shard-$k.stdout" 2>"$dir/shard-$k.stderr" &
        pids+=($!)
    done
    if [[ -n "$kill_k" ]]; then
        sleep "$(awk -v l="$LEAD_SECS" -v k="$KILL_AFTER" 'BEGIN { print l + k }')"
        # The replay process itself (the child of `timeout`), not `timeout`.
        pkill -KILL -P "${pids[$kill_k]}" 2>/dev/null || true
    fi
    for p in "${pids[@]}"; do wait "$p" || true; done
}

echo "bench-shards.sh: $SHARDS shards, $REQUESTS requests at $RATE req/s in total (scale $scale), llm-sim at $BASE; results in $OUT" >&2
run_shards "$OUT/run"
echo "| shard | requests | ok | drift p99 (ms) | drift max (ms) | clock start − common start (ms) | first send − common start (ms) | clock est. error (µs) | scheduling |"
echo "|---|---|---|---|---|---|---|---|---|"
for k in $(seq 0 $((SHARDS - 1))); do
    jq -r --arg k "$k" 'def r3: . * 1000 | round / 1000;
        [$k, (.completed + .failed), .status.ok, (.drift.p99_ms | r3), (.drift.max_ms | r3),
        .run.start_at.clock_start_offset_ms, .run.start_at.first_send_ms,
        (if .run.start_at.clock == null then "n/a"
         elif .run.start_at.clock.synchronised then .run.start_at.clock.est_error_us
         else "unsynchronised" end), .run.realtime.policy]
        | map(tostring) | "| " + join(" | ") + " |"' "$OUT/run/shard-$k.jsonl.summary.json"
done
set +e
"$RS" report "$OUT/run" --expected-requests "$REQUESTS" --json >"$OUT/merged.json" 2>"$OUT/merged.err"
merge_rc=$?
echo
echo "merge (report DIR --expected-requests $REQUESTS): exit $merge_rc; $(grep -h 'exactly once\|missing\|duplicated' "$OUT/merged.err" "$OUT/merged.json" 2>/dev/null | head -2)"
# The shards' records only (not each shard's server_metrics.jsonl beside them).
for k in $(seq 0 $((SHARDS - 1))); do cat "$OUT/run/shard-$k.jsonl"; done >"$OUT/concatenated.jsonl"
"$RS" report "$OUT/concatenated.jsonl" --json >"$OUT/concatenated.json" 2>/dev/null
if diff <(jq -S 'del(.run, .warnings, .shards, .merge)' "$OUT/merged.json") \
        <(jq -S 'del(.run, .warnings, .shards, .merge)' "$OUT/concatenated.json") >"$OUT/merge.diff"; then
    echo "merged summary = summary of the concatenated records: yes"
else
    echo "merged summary = summary of the concatenated records: NO (see $OUT/merge.diff)"
fi
echo
echo "one shard killed $KILL_AFTER s after the start:"
run_shards "$OUT/killed" 1
"$RS" report "$OUT/killed" --expected-requests "$REQUESTS" >"$OUT/killed-report.txt" 2>&1
killed_rc=$?
echo "merge exit code: $killed_rc (1 expected); $(grep -m1 -o '[0-9]* missing from shard [0-9]*[^:]*' "$OUT/killed-report.txt")"
