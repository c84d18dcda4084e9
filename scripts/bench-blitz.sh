#!/usr/bin/env bash
# The blitz replayer's own command line through our `client` (issue 16), against llm-sim on
# loopback, for every --num-producer x --channel-capacity pair; one markdown row per pair:
#   drift p99 / max (ms, from the summary), peak RSS (MB, GNU time), bodies built,
#   peak bytes of bodies waiting / budget (MB), records = scheduled (yes/NO).
#
#   scripts/bench-blitz.sh [TRACE]      # default: ../shared/traces/mooncake_conversation_trace.jsonl
#
# Every run is bounded (--time-in-secs and `timeout`); loopback only. Drift numbers need a quiet
# machine and real-time scheduling for the client (which also keeps the cores awake around sends;
# with EXTRA_ARGS=--no-keep-awake on a KVM guest that halts idle vCPUs at once, about one cell in
# ten has a slow burst); see docs/performance.md.
#
# Environment (defaults in brackets):
#   PRODUCERS ["1 2 8 32 64"]       --num-producer values
#   CAPACITIES ["128 40960"]        --channel-capacity values
#   SECS [30]                       --time-in-secs
#   SCALE [1.5]                     --scale-factor
#   QWEN3_DIR [.cache/tokenizers/qwen3]  tokenizer.json and tokenizer_config.json
#   EXTRA_ARGS []                   more flags for `client`
#   BIN_DIR [$CARGO_TARGET_DIR/release or target/release]
#   OUT [bench-results/blitz-<UTC time>]
#   NO_BUILD [0]                    1: do not run `cargo build --release`
# Needs: jq, /usr/bin/time (GNU time), awk.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TRACE="${1:-../shared/traces/mooncake_conversation_trace.jsonl}"
PRODUCERS="${PRODUCERS:-1 2 8 32 64}"
CAPACITIES="${CAPACITIES:-128 40960}"
SECS="${SECS:-30}"
SCALE="${SCALE:-1.5}"
QWEN3_DIR="${QWEN3_DIR:-$ROOT/.cache/tokenizers/qwen3}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/blitz-$(date -u +%Y%m%d-%H%M%S)}"

for tool in jq awk /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench-blitz.sh: $tool not found" >&2; exit 1; }
done
[[ -f "$TRACE" ]] || { echo "bench-blitz.sh: trace $TRACE not found" >&2; exit 1; }
[[ -f "$QWEN3_DIR/tokenizer.json" ]] || {
    echo "bench-blitz.sh: no $QWEN3_DIR/tokenizer.json (scripts/fetch-tokenizer.sh)" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
CLIENT="$BIN_DIR/client"
SIM="$BIN_DIR/llm-sim"
[[ -x "$CLIENT" && -x "$SIM" ]] || { echo "bench-blitz.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"

SIM_LOG="$OUT/llm-sim.log"
"$SIM" --host 127.0.0.1 --port 0 --preset fast --model-name m \
    --tokenizer "$QWEN3_DIR/tokenizer.json" --tokenizer-config "$QWEN3_DIR/tokenizer_config.json" \
    2>"$SIM_LOG" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
BASE=""
for _ in $(seq 600); do
    BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)"
    [[ -n "$BASE" ]] && break
    sleep 0.05
done
[[ -n "$BASE" ]] || { echo "bench-blitz.sh: llm-sim did not start:" >&2; cat "$SIM_LOG" >&2; exit 1; }
echo "bench-blitz.sh: llm-sim at $BASE (pid $SIM_PID); results in $OUT" >&2

echo "| --num-producer | --channel-capacity | drift p99 (ms) | drift max (ms) | peak RSS (MB) | bodies built | waiting peak / budget (MB) | records = scheduled |"
echo "|---|---|---|---|---|---|---|---|"
for cap in $CAPACITIES; do
    for np in $PRODUCERS; do
        run="$OUT/np${np}-cap${cap}"
        # shellcheck disable=SC2086
        /usr/bin/time -v -o "$run.time" timeout $((SECS + 120)) "$CLIENT" \
            --tokenizer "$QWEN3_DIR/tokenizer.json" --tokenizer-config "$QWEN3_DIR/tokenizer_config.json" \
            --endpoint "$BASE/v1/chat/completions" --api openai --dataset mooncake \
            --dataset-path "$TRACE" --scale-factor "$SCALE" --time-in-secs "$SECS" \
            --num-producer "$np" --channel-capacity "$cap" --output-path "$run.jsonl" \
            --summary-path "$run.summary.json" --model-name m --stream $EXTRA_ARGS \
            >"$run.stdout" 2>"$run.stderr" || echo "bench-blitz.sh: run $run exited $?" >&2
        rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$run.time")
        jq -r --arg np "$np" --arg cap "$cap" --arg rss "$rss" '
            "| \($np) | \($cap) | \(.drift.p99_ms * 1000 | round / 1000) | \(.drift.max_ms * 1000 | round / 1000) | \($rss) | \(.run.producer.bodies) | \((.run.producer.peak_buffered_bytes // 0) / 1e6 * 10 | round / 10) / \((.run.producer.budget_bytes // 0) / 1e6 | round) | \(if .counts_add_up then "yes" else "NO" end) (\(.status.total)/\(.scheduled)) |"' \
            "$run.summary.json"
    done
done
