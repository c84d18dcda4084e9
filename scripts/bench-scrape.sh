#!/usr/bin/env bash
# What scraping server metrics costs the sending path (issue 14): the same replay with and
# without scraping the /metrics of 32 llm-sim instances (`llm-sim --instances 32`) every 100 ms,
# alternated REPEAT times; one row per run with the send drift and the scrapes, then the change
# of the mean drift p99.
#
#   scripts/bench-scrape.sh
#
# Environment: N [3000] requests, RATE [50] requests/s, INSTANCES [32], INTERVAL [100ms],
# REPEAT [2], TRACE (a trace file instead of the generated one), BIN_DIR, NO_BUILD, OUT.
# Loopback only; the requests go to instance 0, the scraper reads all of them. Each run is
# bounded by --time-in-secs and `timeout`. About 2 x REPEAT x N / RATE seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${N:-3000}"
RATE="${RATE:-50}"
INSTANCES="${INSTANCES:-32}"
INTERVAL="${INTERVAL:-100ms}"
REPEAT="${REPEAT:-2}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/scrape-$(date -u +%Y%m%d-%H%M%S)}"
command -v jq >/dev/null || { echo "bench-scrape.sh: jq not found" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
mkdir -p "$OUT"
if [[ -z "${TRACE:-}" ]]; then
    TRACE="$OUT/trace.jsonl"
    # N requests at RATE/s; prompts of 2-5 blocks of 512 tokens over 20 shared first blocks.
    awk -v n="$N" -v rate="$RATE" 'BEGIN { for (i = 0; i < n; i++) {
        blocks = 2 + i % 4; ids = sprintf("%d", i % 20);
        for (b = 1; b < blocks; b++) ids = ids sprintf(", %d", 1000 + i * 4 + b);
        printf "{\"timestamp\": %.3f, \"input_length\": %d, \"output_length\": 16, \"hash_ids\": [%s]}\n",
            i * 1000.0 / rate, blocks * 512 - (i * 37) % 300, ids } }' > "$TRACE"
fi
SPAN_S=$(( N / RATE + 30 ))

SIM_LOG="$OUT/llm-sim.log"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port 0 --instances "$INSTANCES" 2>"$SIM_LOG" &
SIM_PID=$!
trap 'kill $SIM_PID 2>/dev/null || true; wait $SIM_PID 2>/dev/null || true' EXIT
URLS=""
for _ in $(seq 600); do
    mapfile -t found < <(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)
    if (( ${#found[@]} >= INSTANCES )); then
        URLS="$(IFS=,; echo "${found[*]}")"
        break
    fi
    sleep 0.05
done
[[ -n "$URLS" ]] || { echo "bench-scrape.sh: llm-sim did not start $INSTANCES instances" >&2; cat "$SIM_LOG" >&2; exit 1; }
ENDPOINT="${URLS%%,*}"

echo "$INSTANCES llm-sim instances, $N requests at $RATE/s to the first; scraping every $INTERVAL; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | scraping | drift p50 (ms) | drift p99 (ms) | drift max (ms) | > 1 ms | scrapes ok / failed | samples |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq "$REPEAT"); do
    for mode in off on; do
        run="$OUT/$mode-$r"
        if [[ "$mode" == on ]]; then
            flags=(--server-metrics "$URLS" --metrics-interval "$INTERVAL")
        else
            flags=(--no-server-metrics)
        fi
        timeout $(( SPAN_S + 60 )) "$BIN_DIR/request-sim" replay --endpoint "$ENDPOINT" \
            --dataset-path "$TRACE" --block-size 512 --time-in-secs "$SPAN_S" --quiet \
            --seed "$r" "${flags[@]}" --output-path "$run.jsonl" >"$run.stdout" 2>"$run.stderr" \
            || echo "bench-scrape.sh: run $run exited $?" >&2
        jq -r --arg run "$r" --arg mode "$mode" '[$run, $mode,
            (.drift.p50_ms * 1000 | round / 1000), (.drift.p99_ms * 1000 | round / 1000),
            (.drift.max_ms * 1000 | round / 1000), .drift.over_1ms,
            (if .server then "\(.server.cluster.scrapes_ok) / \(.server.cluster.scrapes_failed)" else "-" end),
            (if .server then .server.samples else "-" end)]
            | map(tostring) | "| " + join(" | ") + " |"' "$run.jsonl.summary.json" 2>/dev/null \
            || echo "| $r | $mode | (no summary: see $run.stderr) |"
    done
done
echo
for mode in off on; do
    jq -s --arg mode "$mode" '[.[].drift.p99_ms] | add / length' "$OUT"/"$mode"-*.jsonl.summary.json \
        > "$OUT/p99-$mode.txt" 2>/dev/null || echo nan > "$OUT/p99-$mode.txt"
done
awk -v off="$(cat "$OUT/p99-off.txt")" -v on="$(cat "$OUT/p99-on.txt")" \
    'BEGIN { printf "mean drift p99: %.3f ms without scraping, %.3f ms with; change %+.3f ms\n", off, on, on - off }'
echo "files: $OUT"
