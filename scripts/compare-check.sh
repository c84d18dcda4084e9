#!/usr/bin/env bash
# Repeats and verdicts end to end (issue 29): `replay --repeat N` against two llm-sim servers,
# A at its preset's speed and B with every step SLOWDOWN times longer (`--speedup 1/SLOWDOWN`),
# then `compare A B` (Welch's t over the repeats), then `compare A A2` (a second set against
# the same server A: no significant difference expected). Prints each set's interval table and
# both verdict tables; the last lines say whether TTFT and E2E were called significantly worse.
#
#   scripts/compare-check.sh [TRACE]     # default: the Mooncake conversation trace in ../shared
#
# Environment: REPEATS [5], REQUESTS [200] per repeat, SCALE [2] (--scale-factor), OUTPUT [64]
# (--max-output-tokens), SLOWDOWN [1.1], PRESET [qwen3-8b-h100], BIN_DIR [target/release],
# OUT [bench-results/compare-<UTC time>], NO_BUILD [0]. Loopback only; every replay bounded by
# --time-in-secs and `timeout`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TRACE="${1:-../shared/traces/mooncake_conversation_trace.jsonl}"
REPEATS="${REPEATS:-5}"
REQUESTS="${REQUESTS:-200}"
SCALE="${SCALE:-2}"
OUTPUT="${OUTPUT:-64}"
SLOWDOWN="${SLOWDOWN:-1.1}"
PRESET="${PRESET:-qwen3-8b-h100}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/compare-$(date -u +%Y%m%d-%H%M%S)}"
[[ -f "$TRACE" ]] || { echo "compare-check.sh: trace $TRACE not found" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"; SIM="$BIN_DIR/llm-sim"
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# start_sim NAME SPEEDUP: an llm-sim on a free loopback port; its base URL in $URL (run in this
# shell, not in $(...), which would wait for the server's output to close).
start_sim() {
    local log="$OUT/llm-sim-$1.log"
    "$SIM" --host 127.0.0.1 --port 0 --preset "$PRESET" --speedup "$2" >/dev/null 2>"$log" &
    PIDS+=($!)
    URL=""
    for _ in $(seq 200); do
        URL="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$log" | awk '{print $3}' || true)"
        [[ -n "$URL" ]] && return
        sleep 0.05
    done
    echo "compare-check.sh: llm-sim $1 did not start" >&2; cat "$log" >&2; exit 1
}
start_sim a 1; A_URL="$URL"
start_sim b "$(awk -v s="$SLOWDOWN" 'BEGIN { printf "%.6f", 1 / s }')"; B_URL="$URL"
echo "load before: $(uptime)"
set_of() { # URL NAME SEED: one repeat set
    timeout 900 "$RS" replay --dataset-path "$TRACE" --endpoint "$1" \
        --max-requests "$REQUESTS" --scale-factor "$SCALE" --max-output-tokens "$OUTPUT" \
        --time-in-secs 120 --seed "$3" --quiet --repeat "$REPEATS" --result-dir "$OUT/$2" \
        >"$OUT/$2.out" 2>"$OUT/$2.err"
    echo "== set $2 ($1): $REPEATS repeats"
    sed -n '/repeats: mean and/,$p' "$OUT/$2.out"
}
set_of "$A_URL" A 29
set_of "$B_URL" B 29
set_of "$A_URL" A2 30
echo "== compare A B (B: every step ${SLOWDOWN}x longer)"
status=0
"$RS" compare "$OUT/A" "$OUT/B" --html "$OUT/compare-A-B.html" \
    --fail-if-worse mean_ttft_ms:5 --fail-if-worse mean_e2el_ms:5 | sed -n '/Significance/,$p' || status=$?
echo "compare A B --fail-if-worse mean_ttft_ms:5 --fail-if-worse mean_e2el_ms:5: exit $status"
echo "== compare A A2 (same server, other seeds)"
status=0
"$RS" compare "$OUT/A" "$OUT/A2" --fail-if-worse mean_ttft_ms:5 | sed -n '/Significance/,$p' || status=$?
echo "compare A A2 --fail-if-worse mean_ttft_ms:5: exit $status"
echo "load after: $(uptime)"
