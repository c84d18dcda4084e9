#!/usr/bin/env bash
# End-to-end benchmark of request-sim against llm-sim on loopback (see docs/performance.md).
#
#   scripts/bench.sh [TRACE]            # default: ../shared/traces/mooncake_conversation_trace.jsonl
#
# Starts llm-sim as a separate process on 127.0.0.1 (fast preset, cheap prefill, so the
# server is not the bottleneck), then replays slices of the trace with streaming at each
# offered rate and prints one row per rate: medians of REPEATS runs of
#   achieved send rate, completions/s, prompt tokens sent/s, client CPU s per 1,000 requests and
#   % of one core, peak RSS, drift p50/p99/max, time from launch to first request.
# Then a start-up row with the Qwen3 tokenizer (dry run; phases from the summary; peak RSS), a
# Qwen3 dry run of the whole trace (peak RSS), and, with FULL_TRACE=1, the whole trace
# compressed in time against llm-sim (peak RSS).
#
# Every run is bounded: --max-requests, --time-in-secs and `timeout`. Loopback only.
#
# Environment (defaults in brackets):
#   RATES ["50 100 200 400 800 1000 1200 1600 2000"]  offered rates, req/s
#   SECONDS_PER_RUN [12]   requests per run = rate x this (at most the whole trace)
#   REPEATS [3]            runs per rate (the median is printed)
#   FULL_OUTPUT_UP_TO [100] rates above this use --max-output-tokens SHORT_OUTPUT
#   SHORT_OUTPUT [16]      output cap for the high rates
#   THREADS []             --threads for the client (default: the client's default)
#   EXTRA_ARGS []          more flags for `request-sim replay`
#   QWEN3_DIR [.cache/tokenizers/qwen3]  tokenizer for the start-up row (skipped if absent)
#   FULL_TRACE [0]         1: also replay all requests at FULL_TRACE_SCALE with short outputs
#   FULL_TRACE_SCALE [100]
#   BIN_DIR [$CARGO_TARGET_DIR/release or target/release]  where request-sim and llm-sim are
#   OUT [bench-results/<UTC time>]  records, summaries and logs of every run
#   NO_BUILD [0]           1: do not run `cargo build --release`
#   NICE [0]               nice level of client and server (e.g. -10 on a shared machine; root)
#   SCRAPE [0]             1: every client run serves its live metrics (`--metrics-port 0
#                          --metrics-linger 0`) and a loop GETs its /metrics every second while it
#                          runs (the cost of being watched; scripts/bench-metrics-overhead.sh
#                          compares with and without)
# Needs: jq, /usr/bin/time (GNU time), awk; curl with SCRAPE=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TRACE="${1:-../shared/traces/mooncake_conversation_trace.jsonl}"
RATES="${RATES:-50 100 200 400 800 1000 1200 1600 2000}"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-12}"
REPEATS="${REPEATS:-3}"
FULL_OUTPUT_UP_TO="${FULL_OUTPUT_UP_TO:-100}"
SHORT_OUTPUT="${SHORT_OUTPUT:-16}"
THREADS="${THREADS:-}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
QWEN3_DIR="${QWEN3_DIR:-$ROOT/.cache/tokenizers/qwen3}"
FULL_TRACE="${FULL_TRACE:-0}"
FULL_TRACE_SCALE="${FULL_TRACE_SCALE:-100}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/$(date -u +%Y%m%d-%H%M%S)}"
NICE="${NICE:-0}"
SCRAPE="${SCRAPE:-0}"

tools=(jq awk /usr/bin/time)
[[ "$SCRAPE" == 1 ]] && tools+=(curl)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "bench.sh: $tool not found" >&2; exit 1; }
done
[[ -f "$TRACE" ]] || { echo "bench.sh: trace $TRACE not found" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"

# ---- the server: a separate process, so the client's CPU is measured alone ----
SIM_LOG="$OUT/llm-sim.log"
nice -n "$NICE" "$SIM" --host 127.0.0.1 --port 0 --preset fast --prefill-token-us 0.01 \
    --block-size 512 --max-num-seqs 1024 --max-num-batched-tokens 1048576 --worker-threads 1 \
    2>"$SIM_LOG" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
BASE=""
for _ in $(seq 100); do
    BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | awk '{print $3}' || true)"
    [[ -n "$BASE" ]] && break
    sleep 0.05
done
[[ -n "$BASE" ]] || { echo "bench.sh: llm-sim did not start:" >&2; cat "$SIM_LOG" >&2; exit 1; }
echo "bench.sh: llm-sim at $BASE (pid $SIM_PID); results in $OUT" >&2

TOTAL=$(grep -c . "$TRACE")
# Trace time (ms, rebased to the first request) of request number n (1-based).
ts_of() { awk -v n="$1" 'NR == 1 { t0 = 0 } { if (match($0, /"timestamp": *[0-9.eE+-]+/)) { v = substr($0, RSTART, RLENGTH); sub(/.*: */, "", v); if (NR == 1) t0 = v; if (NR == n) { print v - t0; exit } } }' "$TRACE"; }

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ms_epoch() { date +%s%3N; }
iso_to_ms() { date -d "$1" +%s%3N; }

# scrape_loop ERRFILE PID COUNTFILE: GET the run's /metrics (its URL from the start-up line in
# ERRFILE) every second while PID runs; the number of answered scrapes goes to COUNTFILE.
scrape_loop() {
    local err="$1" pid="$2" n=0 url=""
    while kill -0 "$pid" 2>/dev/null; do
        if [[ -z "$url" ]]; then
            url="$(grep -o 'live metrics: http://[0-9.:]*/metrics' "$err" 2>/dev/null | awk '{print $3}' | head -1 || true)"
            [[ -z "$url" ]] && { sleep 0.05; continue; }
        fi
        if curl -s -o /dev/null --max-time 1 "$url"; then n=$((n + 1)); fi
        sleep 1
    done
    echo "$n" >"$3"
}

# run NAME ARGS... : one client run under /usr/bin/time; prints a TSV line of its metrics.
run_client() {
    local name="$1"; shift
    local rec="$OUT/$name.jsonl" sum="$OUT/$name.jsonl.summary.json" tim="$OUT/$name.time"
    local live=() scraper="" pid
    [[ "$SCRAPE" == 1 ]] && live=(--metrics-port 0 --metrics-linger 0)
    local t0; t0=$(ms_epoch)
    # shellcheck disable=SC2086
    timeout 120 nice -n "$NICE" /usr/bin/time -o "$tim" -f '%e %U %S %M' \
        "$RS" replay --dataset-path "$TRACE" --quiet -o "$rec" ${THREADS:+--threads "$THREADS"} \
        "${live[@]}" "$@" $EXTRA_ARGS >"$OUT/$name.out" 2>"$OUT/$name.err" &
    pid=$!
    if [[ "$SCRAPE" == 1 ]]; then
        scrape_loop "$OUT/$name.err" "$pid" "$OUT/$name.scrapes" &
        scraper=$!
    fi
    local status=0
    wait "$pid" || status=$?
    [[ -n "$scraper" ]] && wait "$scraper"
    if (( status != 0 )); then
        echo "bench.sh: run $name failed (see $OUT/$name.err)" >&2; tail -3 "$OUT/$name.err" >&2; return 1
    fi
    local first; first=$(iso_to_ms "$(jq -r .run.started_at "$sum")")
    read -r wall user sys rss_kb < <(tail -1 "$tim")
    jq -r --arg wall "$wall" --arg cpu "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" \
        --arg rss "$rss_kb" --arg startup "$((first - t0))" '
        [ .run.producer.bodies_per_s,
          .request_throughput,
          (.run.producer.prompt_tokens * .run.producer.bodies_per_s / ([.run.producer.bodies, 1] | max)),
          (($cpu | tonumber) / ([.scheduled, 1] | max) * 1000),
          (($cpu | tonumber) / ($wall | tonumber) * 100),
          (($rss | tonumber) / 1024),
          .drift.p50_ms, .drift.p99_ms, .drift.max_ms,
          ($startup | tonumber),
          .scheduled, .failed ] | @tsv' "$sum"
}

summarize() { # stdin: TSV rows of one rate; prints medians of each column
    awk -F'\t' '{ for (i = 1; i <= NF; i++) col[i] = col[i] $i "\n" } END { for (i = 1; i <= NF; i++) printf "%s%s", col[i], (i < NF ? "\x1e" : "") }' |
    { IFS=$'\x1e' read -r -d '' -a cols || true
      out=()
      for c in "${cols[@]}"; do out+=("$(printf '%s' "$c" | grep . | median)"); done
      printf '%s\n' "${out[*]}"; }
}

printf '\n%-6s %6s %6s %8s %9s %10s %7s %7s %8s %8s %8s %8s %7s %6s\n' \
    rate reqs out "sent/s" "done/s" "Mtok/s" "cpu/1k" "cpu%" "rss_MB" "d50_ms" "d99_ms" "dmax_ms" "start" errs
for rate in $RATES; do
    n=$(awk -v r="$rate" -v s="$SECONDS_PER_RUN" -v t="$TOTAL" 'BEGIN { n = int(r * s); print (n > t ? t : n) }')
    span=$(ts_of "$n")
    # Scale so that this slice's n requests are offered at `rate` on average.
    scale=$(awk -v n="$n" -v span="$span" -v r="$rate" 'BEGIN { printf "%.4f", (span / 1000) * r / (n - 1) }')
    out_args=(); out_label=full
    if (( rate > FULL_OUTPUT_UP_TO )); then out_args=(--max-output-tokens "$SHORT_OUTPUT"); out_label=$SHORT_OUTPUT; fi
    limit=$(awk -v s="$SECONDS_PER_RUN" 'BEGIN { print s * 3 + 10 }')
    rows=""
    for k in $(seq "$REPEATS"); do
        row=$(run_client "r${rate}-$k" --endpoint "$BASE" --model-name llm-sim --chat-overhead 0 \
            --max-requests "$n" --scale-factor "$scale" --time-in-secs "$limit" --grace-secs 10 \
            "${out_args[@]}") || continue
        rows+="$row"$'\n'
    done
    [[ -n "$rows" ]] || { printf '%-6s (all runs failed)\n' "$rate"; continue; }
    read -r sent done_ tps cpu1k cpup rss d50 d99 dmax start reqs errs < <(printf '%s' "$rows" | summarize)
    printf '%-6s %6.0f %6s %8.1f %9.1f %10.2f %7.2f %7.1f %8.1f %8.3f %8.3f %8.3f %7.0f %6.0f\n' \
        "$rate" "$reqs" "$out_label" "$sent" "$done_" "$(awk -v t="$tps" 'BEGIN{print t/1e6}')" \
        "$cpu1k" "$cpup" "$rss" "$d50" "$d99" "$dmax" "$start" "$errs"
    if [[ "$SCRAPE" == 1 ]]; then
        echo "bench.sh: rate $rate: /metrics answered $(cat "$OUT"/r"$rate"-*.scrapes 2>/dev/null | awk '{ s += $1 } END { print s + 0 }') scrapes (one a second) over $REPEATS runs" >&2
    fi
done
# How the client was scheduled (run.realtime of the first summary): the drift numbers depend on it.
first_sum=$(ls "$OUT"/r*-1.jsonl.summary.json 2>/dev/null | head -1 || true)
if [[ -n "$first_sum" ]]; then
    jq -r '.run.realtime // {} | "client scheduling: \(.policy // "unknown")" +
        (if .priority then " (SCHED_FIFO priority \(.priority), I/O threads raised around send times)" else "" end) +
        (if .reason then " - \(.reason)" else "" end)' "$first_sum"
fi

# ---- start-up with the Qwen3 tokenizer (dry run: no server needed) ----
if [[ -f "$QWEN3_DIR/tokenizer.json" ]]; then
    echo
    printf '%-22s %8s %8s %8s %8s %8s %8s %8s %10s %10s %8s\n' "qwen3 dry run (median)" launch total trace tokenizer vocab check warmup "Mtok/s/thr" "bodies/s" rss_MB
    rows=""
    for k in $(seq "$REPEATS"); do
        t0=$(ms_epoch)
        sum="$OUT/qwen3-dry-$k.jsonl.summary.json"
        # shellcheck disable=SC2086
        timeout 120 nice -n "$NICE" /usr/bin/time -f "%M" -o "$OUT/qwen3-dry-$k.rss" \
            "$RS" replay --dataset-path "$TRACE" --quiet -o "$OUT/qwen3-dry-$k.jsonl" \
            --tokenizer "$QWEN3_DIR/tokenizer.json" --tokenizer-config "$QWEN3_DIR/tokenizer_config.json" \
            --endpoint http://127.0.0.1:9 --model-name qwen3 --dry-run --scale-factor 1000000 \
            --max-requests 2000 $EXTRA_ARGS >"$OUT/qwen3-dry-$k.out" 2>"$OUT/qwen3-dry-$k.err" || {
            echo "bench.sh: qwen3 dry run failed (see $OUT/qwen3-dry-$k.err)" >&2; continue; }
        first=$(iso_to_ms "$(jq -r .run.started_at "$sum")")
        rows+=$(jq -r --arg launch "$((first - t0))" --arg rss "$(tail -1 "$OUT/qwen3-dry-$k.rss")" \
            '.run.startup as $s | .run.producer as $p |
            [($launch | tonumber), $s.total_ms, $s.trace_load_ms, $s.tokenizer_load_ms, $s.vocab_ms,
             $s.prompt_check_ms, $s.warmup_ms, ($p.tokens_per_s_per_thread / 1e6), $p.bodies_per_s,
             (($rss | tonumber) / 1024)] | @tsv' "$sum")$'\n'
    done
    if [[ -n "$rows" ]]; then
        read -r launch total trace tok vocab check warm mtok bps rss < <(printf '%s' "$rows" | summarize)
        printf '%-22s %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %8.1f %10.1f %10.0f %8.1f\n' "" \
            "$launch" "$total" "$trace" "$tok" "$vocab" "$check" "$warm" "$mtok" "$bps" "$rss"
    fi
    # The whole trace with the tokenizer (issue 13: peak RSS under 100 MB at any scale).
    # shellcheck disable=SC2086
    if timeout 300 nice -n "$NICE" /usr/bin/time -f "%M" -o "$OUT/qwen3-whole.rss" \
        "$RS" replay --dataset-path "$TRACE" --quiet -o "$OUT/qwen3-whole.jsonl" \
        --tokenizer "$QWEN3_DIR/tokenizer.json" --tokenizer-config "$QWEN3_DIR/tokenizer_config.json" \
        --endpoint http://127.0.0.1:9 --model-name qwen3 --dry-run --scale-factor 1000000 \
        $EXTRA_ARGS >"$OUT/qwen3-whole.out" 2>"$OUT/qwen3-whole.err"; then
        printf 'qwen3 dry run, whole trace (%s requests): peak RSS %.1f MB\n' \
            "$(jq -r .scheduled "$OUT/qwen3-whole.jsonl.summary.json")" \
            "$(awk '{ v = $1 } END { print v / 1024 }' "$OUT/qwen3-whole.rss")"
    else
        echo "bench.sh: qwen3 whole-trace dry run failed (see $OUT/qwen3-whole.err)" >&2
    fi
fi

# ---- the whole trace, compressed in time: memory must stay flat ----
if [[ "$FULL_TRACE" == 1 ]]; then
    echo
    row=$(run_client full-trace --endpoint "$BASE" --model-name llm-sim --chat-overhead 0 \
        --scale-factor "$FULL_TRACE_SCALE" --max-output-tokens "$SHORT_OUTPUT" --grace-secs 10 \
        --time-in-secs 110) || true
    if [[ -n "$row" ]]; then
        read -r sent done_ tps cpu1k cpup rss d50 d99 dmax start reqs errs <<<"$row"
        printf 'whole trace: %s requests at scale %s: %.1f req/s sent, peak RSS %.1f MB, drift p99 %.3f ms, max %.3f ms, %s errors, CPU %.1f%%\n' \
            "$reqs" "$FULL_TRACE_SCALE" "$sent" "$rss" "$d99" "$dmax" "$errs" "$cpup"
    fi
fi
