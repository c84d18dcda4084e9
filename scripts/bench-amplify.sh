#!/usr/bin/env bash
# `--amplify 4` against the same 4x load made by `--scale-factor` (issue 28), loopback only,
# each replay bounded by the window's span and `timeout`:
#
#   scripts/bench-amplify.sh            # every row below
#   ROWS="orig amp-session" scripts/bench-amplify.sh
#
# The first WINDOW seconds of the Mooncake conversation trace (`transform --time-window`), its
# sessions inferred from hash ids (`transform --infer-sessions`), then per row an llm-sim with
# INSTANCES instances behind a router (`--preset PRESET --num-gpu-blocks CACHE_BLOCKS`, blocks
# of 16 tokens, `--speedup SPEEDUP`) and `request-sim replay` through it at `--scale-factor
# SPEEDUP` (so the engines see the trace's own rate in simulated time; the 4x row scales by
# 4 x SPEEDUP). Rows:
#
#   orig          the window, 1 instance
#   amp-prefix    --amplify 4 (seeded), 4 instances, prefix-aware router
#   amp-session   --infer-sessions --amplify 4, 4 instances, session router, request-sim
#                 --session-header x-session-id (each inferred conversation pinned)
#   amp-rr        --amplify 4, 4 instances, round-robin (no affinity: the floor)
#   scale         the window at --scale-factor 4 x SPEEDUP, 4 instances, prefix-aware
#   orig4-session the window (1x load) with inferred sessions, 4 instances, session router
#
# Prints per row the requests, the server prefix-cache hit ratio (sum of cached_tokens over
# prompt tokens, from the records), its difference to the first row (`orig` by default), and the offline routing what-if
# (`request-sim analyze --instances N --routing POLICY --cache-tokens CACHE_BLOCKS*16`) of the
# same trace. The load average is printed at start and end: the machine may be shared (hit
# ratios come from the responses and do not depend on it).
#
# Environment (defaults in brackets):
#   WINDOW [900]  SPEEDUP [10]  PRESET [fast]  CACHE_BLOCKS [500000]  SEED [1]
#   ROWS [orig amp-prefix amp-session amp-rr scale orig4-session]
#   TRACE [../shared/traces/mooncake_conversation_trace.jsonl]
#   BIN_DIR [target/release]  NO_BUILD [0]  OUT [bench-results/amplify-<UTC time>]
# Needs: jq, awk.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WINDOW="${WINDOW:-900}"
SPEEDUP="${SPEEDUP:-10}"
PRESET="${PRESET:-fast}"
CACHE_BLOCKS="${CACHE_BLOCKS:-500000}"
SEED="${SEED:-1}"
ROWS="${ROWS:-orig amp-prefix amp-session amp-rr scale orig4-session}"
TRACE="${TRACE:-$ROOT/../shared/traces/mooncake_conversation_trace.jsonl}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/amplify-$(date -u +%Y%m%d-%H%M%S)}"
for tool in jq awk; do
    command -v "$tool" >/dev/null || { echo "bench-amplify.sh: $tool not found" >&2; exit 1; }
done
[[ -r "$TRACE" ]] || { echo "bench-amplify.sh: no trace at $TRACE" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-amplify.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"
WIN="$OUT/win.jsonl"
INF="$OUT/win_sessions.jsonl"
AMP="$OUT/win_amp4.jsonl"
AMPS="$OUT/win_sessions_amp4.jsonl"
"$RS" transform "$TRACE" -o "$WIN" --time-window "0..$WINDOW" 2>"$OUT/transform.log"
"$RS" transform "$WIN" -o "$INF" --infer-sessions 2>>"$OUT/transform.log"
"$RS" transform "$WIN" -o "$AMP" --amplify 4 --seed "$SEED" 2>>"$OUT/transform.log"
"$RS" transform "$WIN" -o "$AMPS" --infer-sessions --amplify 4 --seed "$SEED" 2>>"$OUT/transform.log"
grep -m1 -- '--infer-sessions' "$OUT/transform.log" | sed 's/^request-sim: /window: /'
SPAN_S=$(awk -v w="$WINDOW" 'BEGIN { print w + 10 }')
echo "window: first $WINDOW s of $TRACE ($(wc -l <"$WIN") requests); preset $PRESET, $CACHE_BLOCKS blocks of 16 tokens per instance, speedup = scale $SPEEDUP; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

SIM_PID=""
cleanup() { [[ -n "$SIM_PID" ]] && { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }; }
trap cleanup EXIT

# start_sim INSTANCES ROUTER LOG: starts llm-sim; sets SIM_PID and URL (the router's).
start_sim() {
    local n="$1" router="$2" log="$3"
    "$SIM" --host 127.0.0.1 --port 0 --instances "$n" --router "$router" --preset "$PRESET" \
        --num-gpu-blocks "$CACHE_BLOCKS" --speedup "$SPEEDUP" 2>"$log" &
    SIM_PID=$!
    URL=""
    for _ in $(seq 300); do
        URL="$(grep -o 'router ([a-z-]*, what-if studies only) listening on http://127\.0\.0\.1:[0-9]*' "$log" | awk '{print $NF}' || true)"
        [[ -n "$URL" ]] && return 0
        kill -0 "$SIM_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench-amplify.sh: llm-sim did not start" >&2; cat "$log" >&2; exit 1
}

BASE=""
printf '%-14s %9s %5s %-13s %10s %9s %10s\n' row requests inst router "hit ratio" "vs orig" offline
# row NAME TRACE INSTANCES ROUTER SCALE EXTRA...: one replay, one line of the table.
row() {
    local name="$1" file="$2" n="$3" router="$4" scale="$5"; shift 5
    local dir="$OUT/$name" limit
    limit=$(awk -v s="$SPAN_S" -v x="$scale" 'BEGIN { printf "%d", s / x + 120 }')
    mkdir -p "$dir"
    start_sim "$n" "$router" "$dir/sim.log"
    timeout $((limit + 60)) "$RS" replay --endpoint "$URL" --dataset-path "$file" --quiet \
        --scale-factor "$scale" --seed "$SEED" --time-in-secs "$limit" --no-server-metrics \
        --result-dir "$dir" -o "$dir/records.jsonl" "$@" >"$dir/console.txt" 2>"$dir/replay.log" || true
    cleanup; SIM_PID=""
    [[ -s "$dir/summary.json" ]] || { echo "bench-amplify.sh: no summary in $dir (see $dir/replay.log)" >&2; exit 1; }
    local hit reqs off
    hit=$(jq '.cache.hit_ratio' "$dir/summary.json")
    reqs=$(jq '.completed' "$dir/summary.json")
    off=$("$RS" analyze "$file" --instances "$n" --routing "$router" \
        --cache-tokens $((CACHE_BLOCKS * 16)) --json 2>/dev/null | jq '.routing.policies[0].hit_ratio')
    [[ -z "$BASE" ]] && BASE="$hit"
    awk -v r="$name" -v q="$reqs" -v n="$n" -v p="$router" -v h="$hit" -v b="$BASE" -v o="$off" \
        'BEGIN { printf "%-14s %9d %5d %-13s %9.2f%% %+8.2f %9.2f%%\n", r, q, n, p, h * 100, (h - b) * 100, o * 100 }'
}

for r in $ROWS; do
    case "$r" in
        orig) row orig "$WIN" 1 prefix-aware "$SPEEDUP" ;;
        amp-prefix) row amp-prefix "$AMP" 4 prefix-aware "$SPEEDUP" ;;
        amp-session) row amp-session "$AMPS" 4 session "$SPEEDUP" --session-header x-session-id ;;
        amp-rr) row amp-rr "$AMP" 4 round-robin "$SPEEDUP" ;;
        scale) row scale "$WIN" 4 prefix-aware "$((SPEEDUP * 4))" ;;
        orig4-session) row orig4-session "$INF" 4 session "$SPEEDUP" --session-header x-session-id ;;
        *) echo "bench-amplify.sh: unknown row $r" >&2; exit 2 ;;
    esac
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results in $OUT"
