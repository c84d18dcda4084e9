#!/usr/bin/env bash
# `request-sim convert`'s memory on a log of many GB (issue 28), without a log on disk: a
# generated OpenAI-format log (scripts/make_big_log.py, distinct text, multi-turn conversations,
# shared system prompts) is piped into `convert -` and the converter's resident memory is
# sampled against the bytes it has been fed:
#
#   scripts/bench-convert-memory.sh                    # exact, then --forget-after 3600
#   MODES="exact" REQUESTS=200000 scripts/bench-convert-memory.sh
#
# Per mode: a line every SAMPLE_S seconds (requests and GB generated so far, the converter's
# VmRSS), then the converter's report line about sessions and blocks and `/usr/bin/time -v`'s
# maximum RSS and CPU time. The trace goes to $OUT (deleted at the end unless KEEP=1: it is a
# few hundred bytes per request). Bounded by REQUESTS and by `timeout LIMIT_S` per mode.
#
# Environment (defaults in brackets):
#   REQUESTS [1000000]  RATE [5] (new conversations/s)  BLOCK [16]  FORGET [3600]
#   MODES [exact forget]  SAMPLE_S [20]  LIMIT_S [5400]
#   TOKENIZER [.cache/tokenizers/qwen3]  BIN_DIR [target/release]  NO_BUILD [0]
#   OUT [bench-results/convert-memory-<UTC time>]  KEEP [0]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
REQUESTS="${REQUESTS:-1000000}"
RATE="${RATE:-5}"
BLOCK="${BLOCK:-16}"
FORGET="${FORGET:-3600}"
MODES="${MODES:-exact forget}"
SAMPLE_S="${SAMPLE_S:-20}"
LIMIT_S="${LIMIT_S:-5400}"
TOKENIZER="${TOKENIZER:-$ROOT/.cache/tokenizers/qwen3}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/convert-memory-$(date -u +%Y%m%d-%H%M%S)}"
[[ -d "$TOKENIZER" ]] || { echo "bench-convert-memory.sh: no tokenizer at $TOKENIZER (scripts/fetch-tokenizer.sh)" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim --bin request-sim >&2
fi
RS="$BIN_DIR/request-sim"
[[ -x "$RS" ]] || { echo "bench-convert-memory.sh: no binary in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"
echo "log: scripts/make_big_log.py --requests $REQUESTS --rate $RATE (piped); convert --block-size $BLOCK, Qwen3 tokenizer; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

for mode in $MODES; do
    extra=()
    case "$mode" in
        exact) ;;
        forget) extra=(--forget-after "$FORGET") ;;
        *) echo "bench-convert-memory.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
    prog="$OUT/$mode.progress"
    : >"$prog"
    echo "== $mode ${extra[*]}"
    (python3 scripts/make_big_log.py --requests "$REQUESTS" --rate "$RATE" --progress "$prog" 2>/dev/null |
        /usr/bin/time -v -o "$OUT/$mode.time" timeout "$LIMIT_S" "$RS" convert - -o "$OUT/$mode.trace.jsonl" \
            --tokenizer "$TOKENIZER" --block-size "$BLOCK" --salt bench --no-analyze --json "${extra[@]}" \
            >"$OUT/$mode.report.json" 2>"$OUT/$mode.log") &
    pipeline=$!
    # The converter's pid (the child of `time`), for sampling.
    pid=""
    for _ in $(seq 100); do
        pid="$(pgrep -n -f -- "^$RS convert - -o $OUT/$mode.trace.jsonl" || true)"
        [[ -n "$pid" ]] && break
        sleep 0.1
    done
    printf '%10s %12s %8s %10s\n' seconds requests "log GB" "RSS MB"
    t0=$(date +%s)
    while kill -0 "$pipeline" 2>/dev/null; do
        sleep "$SAMPLE_S"
        [[ -n "$pid" && -r "/proc/$pid/status" ]] || continue
        rss=$(awk '/VmRSS/ { print $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || echo 0)
        read -r n b <"$prog" || { n=0; b=0; }
        awk -v s=$(($(date +%s) - t0)) -v n="${n:-0}" -v b="${b:-0}" -v r="$rss" \
            'BEGIN { printf "%10d %12d %8.2f %10.1f\n", s, n, b / 1e9, r }'
    done
    wait "$pipeline" || true
    jq -c '.convert | {converted, sessions, multi_turn_sessions, distinct_blocks, blocks_held, session_entries_held}' "$OUT/$mode.report.json" 2>/dev/null ||
        { echo "bench-convert-memory.sh: no report (see $OUT/$mode.log)" >&2; tail -3 "$OUT/$mode.log" >&2; }
    awk '/Maximum resident/ { m = $NF } /User time/ { u = $NF } /System time/ { y = $NF } /Elapsed/ { e = $NF }
        END { printf "max RSS %.1f MB; CPU %.0f s; wall %s\n", m / 1024, u + y, e }' "$OUT/$mode.time"
    [[ "${KEEP:-0}" == 1 ]] || rm -f "$OUT/$mode.trace.jsonl"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
