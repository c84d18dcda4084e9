#!/usr/bin/env bash
# Closed-loop sessions benchmark against llm-sim on loopback (issue 11).
#
#   scripts/bench-sessions.sh
#
# Generates a Bailian-format trace: SESSIONS sessions starting RATE per second, each with TURNS
# turns whose trace gap is THINK_S seconds (so about SESSIONS sessions are waiting on their
# parent at once), replays it with `--timing closed --think-time trace` and prints from the
# records:
#   release latency = child send - (parent send + parent done) - think time   (p50/p99/max, ms)
#   drift of the requests released by the clock (first turns)                 (p50/p99/max, ms)
#   drift of the closed-loop turns (measured from their release)              (p50/p99/max, ms)
#   records vs scheduled, server cache hit ratio vs trace-ideal.
#
# Bounded: the trace is finite, --time-in-secs and `timeout` cap the run. Loopback only.
#
# Environment (defaults in brackets):
#   SESSIONS [2000]  RATE [100] (new sessions/s, so the send rate is about RATE req/s)
#   TURNS [3]  THINK_S [20]   OUTPUT [8] output tokens per turn
#   BIN_DIR [target/release]  NO_BUILD [0]  OUT [bench-results/sessions-<UTC time>]
#   EXTRA_ARGS []             more flags for `request-sim replay`
# Needs: jq, awk.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SESSIONS="${SESSIONS:-2000}"
RATE="${RATE:-100}"
TURNS="${TURNS:-3}"
THINK_S="${THINK_S:-20}"
OUTPUT="${OUTPUT:-8}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/sessions-$(date -u +%Y%m%d-%H%M%S)}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
for tool in jq awk; do
    command -v "$tool" >/dev/null || { echo "bench-sessions.sh: $tool not found" >&2; exit 1; }
done
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-sessions.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"

# Trace: session s starts at s/RATE s; turn t at +t*THINK_S s; each turn adds 4 blocks of 16.
TRACE="$OUT/sessions.jsonl"
awk -v n="$SESSIONS" -v rate="$RATE" -v turns="$TURNS" -v think="$THINK_S" -v out="$OUTPUT" 'BEGIN {
    chat = 0; block = 1
    for (s = 0; s < n; s++) {
        ids = ""; parent = -1
        for (t = 0; t < turns; t++) {
            for (k = 0; k < 4; k++) { ids = ids (ids == "" ? "" : ", ") block; block++ }
            printf "{\"chat_id\": %d, \"parent_chat_id\": %d, \"timestamp\": %.3f, \"input_length\": %d, \"output_length\": %d, \"turn\": %d, \"hash_ids\": [%s]}\n", chat, parent, s / rate + t * think, (t + 1) * 64, out, t + 1, ids
            parent = chat; chat++
        }
    }
}' > "$TRACE"
ROWS=$(wc -l < "$TRACE")

SIM_LOG="$OUT/llm-sim.log"
"$SIM" --host 127.0.0.1 --port 0 --preset fast --block-size 16 2>"$SIM_LOG" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
BASE=""
for _ in $(seq 100); do
    BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)"
    [[ -n "$BASE" ]] && break
    sleep 0.1
done
[[ -n "$BASE" ]] || { echo "bench-sessions.sh: llm-sim did not start" >&2; cat "$SIM_LOG" >&2; exit 1; }

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
LIMIT=$(awk -v n="$SESSIONS" -v r="$RATE" -v t="$TURNS" -v th="$THINK_S" 'BEGIN { printf "%d", n / r + (t - 1) * th + 30 }')
# shellcheck disable=SC2086
timeout $((LIMIT + 60)) "$RS" replay --endpoint "$BASE" --dataset-path "$TRACE" --quiet \
    --timing closed --think-time trace --time-in-secs "$LIMIT" \
    -o "$OUT/records.jsonl" $EXTRA_ARGS >"$OUT/console.txt" 2>"$OUT/replay.log"

pct() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit }
    i50 = int(0.50 * NR); if (i50 < 1) i50 = 1; i99 = int(0.99 * NR + 0.999); if (i99 > NR) i99 = NR
    printf "n=%d p50 %.3f p99 %.3f max %.3f ms\n", NR, v[i50], v[i99], v[NR] }'; }
REC="$OUT/records.jsonl"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)')"
echo "load average before / after the run: $LOAD_BEFORE / $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
echo "trace: $ROWS requests, $SESSIONS sessions x $TURNS turns, $RATE sessions/s, think ${THINK_S} s"
echo "records: $(wc -l < "$REC") (scheduled: $(jq '.run.scheduled' "$REC.summary.json"))"
echo -n "release latency (child sent - parent done - think): "
# think_ms: the think time the run applied to that turn (older records: THINK_S).
jq -s --argjson th "$((THINK_S * 1000))" 'INDEX(.index|tostring) as $by
    | .[] | select(.parent_index != null and .sent_ms != null)
    | $by[.parent_index|tostring] as $p
    | select($p.sent_ms != null and $p.done_ms != null)
    | (.sent_ms - ($p.sent_ms + $p.done_ms) - (.think_ms // $th))' "$REC" | pct
echo -n "drift, clock-released (first turns): "
jq 'select(.parent_index == null and .drift_ms != null) | .drift_ms' "$REC" | pct
echo -n "drift, closed-loop turns (from release): "
jq 'select(.parent_index != null and .drift_ms != null) | .drift_ms' "$REC" | pct
echo "cache hit ratio: server $(jq '.cache.hit_ratio' "$REC.summary.json"), trace-ideal $(jq '.cache.ideal_hit_ratio' "$REC.summary.json")"
echo "results in $OUT"
