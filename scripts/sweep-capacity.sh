#!/usr/bin/env bash
# The capacity of an llm-sim preset on a slice of a trace (issue 14): starts llm-sim with
# PRESET at SPEEDUP on 127.0.0.1, runs `request-sim sweep` against it (the capacity search by
# default, or the scale factors in SCALES), and prints the combined table and the one-line
# answer. The sweep's directory has sweep.json, sweep.png and report.html (one per point too).
#
#   TRACE=path/to/mooncake_conversation_trace.jsonl scripts/sweep-capacity.sh
#   TRACE=... SCALES=0.5,1,1.5,2,4 scripts/sweep-capacity.sh     # a fixed list instead
#
# Environment: TRACE (required), PRESET [qwen3-8b-h100], SPEEDUP [4] (simulated time runs this
# much faster: scale SPEEDUP is the trace's real rate, and SLOs are in wall time, i.e. divided
# by SPEEDUP), N [150] requests of the slice, SLO ["ttft:500 tpot:12.5"] (2 s and 50 ms
# simulated at speedup 4), TARGET [0.95], SCALES (empty: search), SEARCH (LO,HI start of the
# search), MAX_POINTS [8], TOLERANCE [0.05], POINT_SECS [90] per point, SEED [1], BIN_DIR,
# NO_BUILD, OUT. Loopback only. At most MAX_POINTS x (POINT_SECS + start-up) seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ -n "${TRACE:-}" ]] || { echo "sweep-capacity.sh: set TRACE to a trace file (e.g. the Mooncake conversation trace)" >&2; exit 1; }
PRESET="${PRESET:-qwen3-8b-h100}"
SPEEDUP="${SPEEDUP:-4}"
N="${N:-150}"
SLO="${SLO:-ttft:500 tpot:12.5}"
TARGET="${TARGET:-0.95}"
MAX_POINTS="${MAX_POINTS:-8}"
TOLERANCE="${TOLERANCE:-0.05}"
POINT_SECS="${POINT_SECS:-90}"
SEED="${SEED:-1}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/capacity-$PRESET-$(date -u +%Y%m%d-%H%M%S)}"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
mkdir -p "$OUT"

SIM_LOG="$OUT/llm-sim.log"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port 0 --preset "$PRESET" --speedup "$SPEEDUP" 2>"$SIM_LOG" &
SIM_PID=$!
trap 'kill $SIM_PID 2>/dev/null || true; wait $SIM_PID 2>/dev/null || true' EXIT
ENDPOINT=""
for _ in $(seq 600); do
    ENDPOINT="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | head -1 | awk '{print $3}' || true)"
    [[ -n "$ENDPOINT" ]] && break
    sleep 0.05
done
[[ -n "$ENDPOINT" ]] || { echo "sweep-capacity.sh: llm-sim did not start" >&2; cat "$SIM_LOG" >&2; exit 1; }

points=()
if [[ -n "${SCALES:-}" ]]; then
    points=(--scale-factors "$SCALES")
else
    points=(--max-points "$MAX_POINTS" --tolerance "$TOLERANCE")
    [[ -n "${SEARCH:-}" ]] && points+=(--search "$SEARCH")
fi
read -r -a slo <<<"$SLO"
echo "llm-sim --preset $PRESET --speedup $SPEEDUP at $ENDPOINT; $N requests of $TRACE; SLOs $SLO at $TARGET; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout $(( (POINT_SECS + 120) * (MAX_POINTS + 1) )) "$BIN_DIR/request-sim" sweep "${points[@]}" \
    --endpoint "$ENDPOINT" --dataset-path "$TRACE" --max-requests "$N" \
    --goodput "${slo[@]}" --target "$TARGET" --time-in-secs "$POINT_SECS" --seed "$SEED" \
    --quiet --sweep-dir "$OUT/sweep" >"$OUT/sweep.stdout" 2>"$OUT/sweep.stderr" \
    || echo "sweep-capacity.sh: the sweep exited $? (see $OUT/sweep.stderr)" >&2
# Each point's own result table is in sweep.stdout and in its directory; the combined table
# and the answer close the output.
sed -n '/^  *scale offer r\/s/,$p' "$OUT/sweep.stdout"
echo
echo "sweep: $OUT/sweep (sweep.json, sweep.png, report.html)"
