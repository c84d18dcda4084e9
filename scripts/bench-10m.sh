#!/usr/bin/env bash
# Streaming traces (issue 13): peak RSS and start-up of a dry run over traces of 100 thousand,
# 1 million and 10 million rows (and the 10-million-row trace gzip-compressed). The traces are
# generated here, outside git (under $DATA), mooncake-style: timestamps ~3,000 rows/s with one
# pair in every hundred out of time order by ~8 ms, 256–2,048 prompt tokens (1–4 hash ids of 512
# tokens: a shared system prompt, a shared conversation, then unique ids), 1–512 output tokens.
# Every run is the same bounded dry run (--time-in-secs), so a flat RSS across sizes means
# memory does not depend on the trace's length.
#
#   scripts/bench-10m.sh
#
# Environment (defaults in brackets): SIZES ["100000 1000000 10000000"], DATA [bench-results/
# traces-10m] (generated traces, reused when present), SCALE [10] (--scale-factor), SECS [15]
# (--time-in-secs), GZ [1] (also the largest trace .gz), BIN_DIR, NO_BUILD, OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SIZES="${SIZES:-100000 1000000 10000000}"
DATA="${DATA:-bench-results/traces-10m}"
SCALE="${SCALE:-10}"
SECS="${SECS:-15}"
GZ="${GZ:-1}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/10m-$(date -u +%Y%m%d-%H%M%S)}"
for tool in jq awk gzip /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench-10m.sh: $tool not found" >&2; exit 1; }
done
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
mkdir -p "$DATA" "$OUT"

# gen N FILE: N rows, deterministic (an LCG, not awk's rand, so every machine writes the same).
gen() {
    awk -v n="$1" 'BEGIN {
        s = 12345; id = 1000000
        for (i = 0; i < n; i++) {
            s = (s * 1103515245 + 12345) % 2147483648; a = s
            s = (s * 1103515245 + 12345) % 2147483648; b = s
            t = i / 3.0
            # One pair in every hundred swapped: out of time order by ~8 ms.
            if (i % 100 == 1) t += 4; else if (i % 100 == 2) t -= 4
            input = 256 + a % 1793; output = 1 + b % 512
            blocks = int((input + 511) / 512)
            ids = (a % 1000)
            if (blocks > 1) ids = ids ", " (1000 + b % 100000)
            for (k = 2; k < blocks; k++) ids = ids ", " (id++)
            printf "{\"timestamp\": %.3f, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%s]}\n", t, input, output, ids
        }
    }'
}

files=()
for n in $SIZES; do
    f="$DATA/trace-$n.jsonl"
    if [[ ! -s "$f" ]]; then
        echo "bench-10m.sh: generating $f" >&2
        gen "$n" >"$f.tmp" && mv "$f.tmp" "$f"
    fi
    files+=("$f")
done
if [[ "$GZ" == 1 ]]; then
    last="${files[${#files[@]}-1]}"
    if [[ ! -s "$last.gz" ]]; then
        echo "bench-10m.sh: compressing $last" >&2
        gzip -1 -c "$last" >"$last.gz.tmp" && mv "$last.gz.tmp" "$last.gz"
    fi
    files+=("$last.gz")
fi

echo "bench-10m.sh: dry runs at --scale-factor $SCALE for --time-in-secs $SECS; load average $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT" >&2
echo "| trace | rows | file MB | peak RSS (MB) | start-up to first send (ms) | trace read at start-up (ms) | requests sent | planned |"
echo "|---|---|---|---|---|---|---|---|"
for f in "${files[@]}"; do
    name=$(basename "$f")
    rows=$(sed -E 's/.*trace-([0-9]+)\.jsonl.*/\1/' <<<"$name")
    out="$OUT/$name.records.jsonl"
    /usr/bin/time -v -o "$OUT/$name.time" "$RS" replay --dataset-path "$f" --dry-run \
        --scale-factor "$SCALE" --time-in-secs "$SECS" --max-output-tokens 16 --seed 1 \
        --quiet --output-path "$out" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" || {
        echo "bench-10m.sh: the run over $f failed (see $OUT/$name.stderr)" >&2; exit 1; }
    rss_kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$OUT/$name.time")
    mb=$(du -m "$f" | cut -f1)
    jq -r --arg name "$name" --arg rows "$rows" --arg mb "$mb" --arg rss "$rss_kb" '
        [$name, $rows, $mb, (($rss | tonumber) / 1024 * 10 | round / 10),
         (.run.startup.total_ms * 10 | round / 10), (.run.startup.trace_load_ms * 10 | round / 10),
         .scheduled, (.run.planned // "unknown")]
        | map(tostring) | "| " + join(" | ") + " |"' "$out.summary.json"
done
