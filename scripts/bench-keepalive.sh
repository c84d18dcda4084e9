#!/usr/bin/env bash
# The keep-alive race against a server with a 5 s idle timeout (issue 17): 2,000 requests in
# 20 bursts of 100, with pauses of 2-7 s between bursts, replayed against llm-sim
# `--idle-close-ms 5000` (a connection idle for more than 5 s is closed, unanswered, when the
# next request arrives on it: uvicorn's and llama.cpp's timer firing as the client reuses it).
# One row per client setting: failures by kind and requests retried on a fresh connection.
#
#   scripts/bench-keepalive.sh
#
# Environment: POOLS ["4 90"] --pool-idle-timeout values (4 = default; 90 = hyper's default,
# i.e. a client that keeps connections longer than the server), BIN_DIR, NO_BUILD, OUT.
# Loopback only; each run is bounded by --time-in-secs and `timeout`. ~2 minutes per row.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
POOLS="${POOLS:-4 90}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/keepalive-$(date -u +%Y%m%d-%H%M%S)}"
command -v jq >/dev/null || { echo "bench-keepalive.sh: jq not found" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
mkdir -p "$OUT"
TRACE="$OUT/bursts.jsonl"
# 20 bursts of 100 requests; pauses cycle through 2, 3, 4.5, 5.5, 6, 7 s.
awk 'BEGIN { split("2000 3000 4500 5500 6000 7000", gap, " "); t = 0;
  for (b = 0; b < 20; b++) { for (i = 0; i < 100; i++)
      printf "{\"timestamp\": %d, \"input_length\": 64, \"output_length\": 4, \"hash_ids\": [%d]}\n", t, b * 100 + i;
    t += gap[b % 6 + 1] } }' > "$TRACE"

SIM_LOG="$OUT/llm-sim.log"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port 0 --idle-close-ms 5000 2>"$SIM_LOG" &
SIM_PID=$!
trap 'kill $SIM_PID 2>/dev/null || true; wait $SIM_PID 2>/dev/null || true' EXIT
BASE=""
for _ in $(seq 600); do
    BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)"
    [[ -n "$BASE" ]] && break
    sleep 0.05
done
[[ -n "$BASE" ]] || { echo "bench-keepalive.sh: llm-sim did not start" >&2; cat "$SIM_LOG" >&2; exit 1; }

echo "| --pool-idle-timeout (s) | requests | ok | connect_error | other failures | retried |"
echo "|---|---|---|---|---|---|"
for pool in $POOLS; do
    run="$OUT/pool$pool"
    timeout 300 "$BIN_DIR/request-sim" replay --endpoint "$BASE" --dataset-path "$TRACE" \
        --block-size 16 --pool-idle-timeout "$pool" --time-in-secs 200 --quiet \
        --output-path "$run.jsonl" >"$run.stdout" 2>"$run.stderr" \
        || echo "bench-keepalive.sh: run $run exited $?" >&2
    jq -r --arg pool "$pool" '[$pool, (.completed + .failed), .status.ok, .status.connect_error,
        (.failed - .status.connect_error), .retried] | map(tostring) | "| " + join(" | ") + " |"' \
        "$run.jsonl.summary.json" 2>/dev/null || echo "| $pool | (no summary: see $run.stderr) |"
done
