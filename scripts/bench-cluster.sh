#!/usr/bin/env bash
# Simulated-cluster benchmarks (issue 15), loopback only, bounded by the trace slice and
# `timeout`:
#
#   scripts/bench-cluster.sh routing   # offline routing what-if vs the same policies online
#   scripts/bench-cluster.sh cost      # 16 instances in one llm-sim process at the trace's rate
#   scripts/bench-cluster.sh all       # both (the default)
#
# routing: the first REQUESTS requests of the Mooncake conversation trace over INSTANCES
#   instances with CACHE_BLOCKS blocks of 16 tokens of prefix cache each. Offline:
#   `request-sim analyze --instances N --routing POLICIES --cache-tokens CACHE_BLOCKS*16`.
#   Online, per policy: `llm-sim --instances N --router POLICY --preset PRESET --num-gpu-blocks
#   CACHE_BLOCKS --speedup SPEEDUP` and `request-sim replay` through the router at
#   `--scale-factor SPEEDUP` (so the engines see the trace's real rate in simulated time),
#   outputs capped at MAX_OUT tokens (generated tokens also fill the engines' caches, which the
#   offline analysis does not count; a small cap keeps that noise small). Prints the hit ratio
#   offline, online (Σ cached_tokens / Σ prompt tokens over the records) and their difference.
#
# cost: the same slice, INSTANCES engines behind the round-robin router in one llm-sim process
#   (single-threaded runtime), full output lengths, at COST_SPEEDUP (1 = real time: ~11 minutes
#   for 2,000 requests; the simulated time and the scale factor move together). Prints llm-sim's
#   CPU time (utime + stime from /proc/PID/stat) per request and the client's send drift p99.
#   The load average at start and end is printed: the machine may be shared.
#
# Environment (defaults in brackets):
#   REQUESTS [2000]  INSTANCES [16]  POLICIES [round-robin,session,prefix-aware]
#   PRESET [qwen3-8b-h100]  CACHE_BLOCKS [23500]  SPEEDUP [10]  MAX_OUT [16]  COST_SPEEDUP [1]
#   TRACE [../shared/traces/mooncake_conversation_trace.jsonl]
#   BIN_DIR [target/release]  NO_BUILD [0]  OUT [bench-results/cluster-<UTC time>]
# Needs: jq, awk, getconf.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-all}"
REQUESTS="${REQUESTS:-2000}"
INSTANCES="${INSTANCES:-16}"
POLICIES="${POLICIES:-round-robin,session,prefix-aware}"
PRESET="${PRESET:-qwen3-8b-h100}"
CACHE_BLOCKS="${CACHE_BLOCKS:-23500}"
SPEEDUP="${SPEEDUP:-10}"
MAX_OUT="${MAX_OUT:-16}"
COST_SPEEDUP="${COST_SPEEDUP:-1}"
TRACE="${TRACE:-$ROOT/../shared/traces/mooncake_conversation_trace.jsonl}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/cluster-$(date -u +%Y%m%d-%H%M%S)}"
case "$MODE" in routing|cost|all) ;; *) echo "usage: $0 [routing|cost|all]" >&2; exit 2 ;; esac
for tool in jq awk getconf; do
    command -v "$tool" >/dev/null || { echo "bench-cluster.sh: $tool not found" >&2; exit 1; }
done
[[ -r "$TRACE" ]] || { echo "bench-cluster.sh: no trace at $TRACE" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-cluster.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"
SLICE="$OUT/slice.jsonl"
head -n "$REQUESTS" "$TRACE" > "$SLICE"
SPAN_S=$(jq -s 'map(.timestamp) | (max - min) / 1000' "$SLICE")
TCK=$(getconf CLK_TCK)
echo "trace slice: $REQUESTS requests over $SPAN_S s ($TRACE); load average: $(cut -d' ' -f1-3 /proc/loadavg)"

SIM_PID=""
cleanup() { [[ -n "$SIM_PID" ]] && { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }; }
trap cleanup EXIT

# start_sim LOG ARGS...: starts llm-sim with a router; sets SIM_PID and ROUTER (its URL).
start_sim() {
    local log="$1"; shift
    "$SIM" --host 127.0.0.1 --port 0 --instances "$INSTANCES" "$@" 2>"$log" &
    SIM_PID=$!
    ROUTER=""
    for _ in $(seq 300); do
        ROUTER="$(grep -o 'router ([a-z-]*, what-if studies only) listening on http://127\.0\.0\.1:[0-9]*' "$log" | awk '{print $NF}' || true)"
        [[ -n "$ROUTER" ]] && return 0
        kill -0 "$SIM_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench-cluster.sh: llm-sim did not start" >&2; cat "$log" >&2; exit 1
}

# cpu_s PID: utime + stime of the process so far, seconds.
cpu_s() { awk -v t="$TCK" '{ print ($14 + $15) / t }' "/proc/$1/stat"; }

# replay DIR SCALE EXTRA...: replays the slice through $ROUTER into DIR, bounded by timeout.
replay() {
    local dir="$1" scale="$2"; shift 2
    local limit
    limit=$(awk -v s="$SPAN_S" -v x="$scale" 'BEGIN { printf "%d", s / x + 120 }')
    timeout $((limit + 60)) "$RS" replay --endpoint "$ROUTER" --dataset-path "$SLICE" --quiet \
        --scale-factor "$scale" --time-in-secs "$limit" --no-server-metrics \
        --result-dir "$dir" -o "$dir/records.jsonl" "$@" >"$dir.console.txt" 2>"$dir.log" || true
    [[ -s "$dir/summary.json" ]] || { echo "bench-cluster.sh: no summary in $dir (see $dir.log)" >&2; exit 1; }
}

if [[ "$MODE" == routing || "$MODE" == all ]]; then
    CACHE_TOKENS=$((CACHE_BLOCKS * 16))
    "$RS" analyze "$SLICE" --instances "$INSTANCES" --routing "$POLICIES" \
        --cache-tokens "$CACHE_TOKENS" --json > "$OUT/offline.json"
    echo
    echo "routing what-if: $INSTANCES instances x $CACHE_BLOCKS blocks of 16 tokens, preset $PRESET, speedup = scale factor $SPEEDUP, outputs <= $MAX_OUT tokens"
    printf '%-14s %10s %10s %8s %12s %14s %16s\n' policy offline online "diff pp" "drift p99" "sim CPU/req" "requests/inst"
    for policy in ${POLICIES//,/ }; do
        start_sim "$OUT/sim-$policy.log" --router "$policy" --preset "$PRESET" \
            --num-gpu-blocks "$CACHE_BLOCKS" --speedup "$SPEEDUP"
        cpu0=$(cpu_s "$SIM_PID")
        replay "$OUT/online-$policy" "$SPEEDUP" --max-output-tokens "$MAX_OUT" --session-user
        cpu1=$(cpu_s "$SIM_PID")
        curl -s "$ROUTER/metrics" > "$OUT/router-$policy.prom" || true
        cleanup; SIM_PID=""
        off=$(jq --arg p "$policy" '.routing.policies[] | select(.policy == $p) | .hit_ratio' "$OUT/offline.json")
        s="$OUT/online-$policy/summary.json"
        on=$(jq '.cache.hit_ratio' "$s")
        n=$(jq '.completed' "$s")
        drift=$(jq '.drift.p99_ms' "$s")
        per=$(awk '/^llm_sim:router_requests_total/ { v = $NF + 0; if (min == "" || v < min) min = v; if (v > max) max = v } END { printf "%d..%d", min, max }' "$OUT/router-$policy.prom")
        awk -v p="$policy" -v off="$off" -v on="$on" -v d="$drift" -v c0="$cpu0" -v c1="$cpu1" -v n="$n" -v per="$per" \
            'BEGIN { printf "%-14s %9.2f%% %9.2f%% %+8.2f %10.3f ms %11.0f us %16s\n", p, off * 100, on * 100, (on - off) * 100, d, (c1 - c0) / (n > 0 ? n : 1) * 1e6, per }'
    done
    echo "one shared LRU cache of $INSTANCES x that (offline, a reference, not a bound): $(jq '.routing.single_cache_hit_ratio * 100 | . * 100 | round / 100' "$OUT/offline.json")%"
fi

if [[ "$MODE" == cost || "$MODE" == all ]]; then
    echo
    echo "cost: $INSTANCES instances in one llm-sim process (round-robin router, preset $PRESET), full outputs, speedup = scale factor $COST_SPEEDUP; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    start_sim "$OUT/sim-cost.log" --router round-robin --preset "$PRESET" --speedup "$COST_SPEEDUP"
    cpu0=$(cpu_s "$SIM_PID")
    replay "$OUT/cost" "$COST_SPEEDUP"
    cpu1=$(cpu_s "$SIM_PID")
    rss=$(awk '/VmHWM/ { print $2 / 1024 }' "/proc/$SIM_PID/status")
    cleanup; SIM_PID=""
    s="$OUT/cost/summary.json"
    awk -v c0="$cpu0" -v c1="$cpu1" -v n="$(jq '.completed' "$s")" -v f="$(jq '.failed' "$s")" \
        -v out="$(jq '.total_output_tokens' "$s")" -v wall="$(jq '.duration_s' "$s")" \
        -v d50="$(jq '.drift.p50_ms' "$s")" -v d99="$(jq '.drift.p99_ms' "$s")" -v rss="$rss" \
        'BEGIN { cpu = c1 - c0
                 printf "completed %d (failed %d) in %.0f s; llm-sim CPU %.2f s = %.0f us per request, %.2f us per output token (%d tokens), %.1f%% of one core; peak RSS %.0f MiB\n", n, f, wall, cpu, cpu / (n > 0 ? n : 1) * 1e6, cpu / (out > 0 ? out : 1) * 1e6, out, cpu / (wall > 0 ? wall : 1) * 100, rss
                 printf "client send drift p50 %.3f ms, p99 %.3f ms\n", d50, d99 }'
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo "results in $OUT"
