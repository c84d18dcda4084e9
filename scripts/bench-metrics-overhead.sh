#!/usr/bin/env bash
# What serving the live metrics costs the client (issue 29): scripts/bench.sh at RATE req/s,
# alternately without `--metrics-port` and with it plus a scraper that GETs /metrics every
# second (bench.sh's SCRAPE=1), PAIRS times, against the Mooncake conversation trace (or TRACE).
# Prints every run's row (drift p50/p99/max and CPU per 1,000 requests are the columns to
# compare) and the medians of each mode, with the machine's load average before and after.
#
#   scripts/bench-metrics-overhead.sh [TRACE]
#
# Environment: RATE [400], PAIRS [3], SECONDS_PER_RUN [12], NICE [0], NO_BUILD [0],
# BIN_DIR and OUT as bench.sh's. Loopback only; every run bounded by bench.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RATE="${RATE:-400}"
PAIRS="${PAIRS:-3}"
OUT="${OUT:-bench-results/metrics-overhead-$(date -u +%Y%m%d-%H%M%S)}"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
mkdir -p "$OUT"
echo "load before: $(uptime)"
rows="$OUT/rows.tsv"
: >"$rows"
for k in $(seq "$PAIRS"); do
    for mode in without with; do
        scrape=0; [[ "$mode" == with ]] && scrape=1
        # One rate, one run; no tokenizer rows (QWEN3_DIR points nowhere).
        line=$(RATES="$RATE" REPEATS=1 NO_BUILD=1 QWEN3_DIR=/nonexistent SCRAPE="$scrape" \
            OUT="$OUT/$mode-$k" "$ROOT/scripts/bench.sh" "$@" | awk -v r="$RATE" '$1 == r')
        [[ -n "$line" ]] || { echo "run $mode-$k failed (see $OUT/$mode-$k)" >&2; continue; }
        printf '%s\t%s\n' "$mode" "$line" >>"$rows"
        scrapes=$({ cat "$OUT/$mode-$k"/*.scrapes 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }')
        printf '%-8s %s   (scrapes answered: %s)\n' "$mode" "$line" "$scrapes"
    done
done
echo "load after: $(uptime)"
printf '\n%-8s %8s %8s %8s %8s %8s\n' "medians" "runs" "cpu/1k" "d50_ms" "d99_ms" "dmax_ms"
for mode in without with; do
    awk -F'\t' -v m="$mode" '$1 == m { print $2 }' "$rows" | awk -v m="$mode" '
        { n++; c[n] = $7; a[n] = $10; b[n] = $11; x[n] = $12 }
        function med(v, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        END { if (n) printf "%-8s %8d %8.2f %8.3f %8.3f %8.3f\n", m, n, med(c, n), med(a, n), med(b, n), med(x, n) }'
done
