#!/usr/bin/env bash
# Client CPU per streamed token (docs/performance.md, "CPU per streamed token").
#
#   scripts/bench-stream.sh
#
# Starts llm-sim on 127.0.0.1 with a fixed inter-token time (engine step = STEP_MS, no prefill or
# per-sequence cost, no simulated EOS: every request streams exactly its output_length tokens),
# then replays two generated traces of N requests at RATE req/s that differ only in their output
# length (L1 and L2 tokens; same prompts, same seed), REPEATS times each, and prints for every
# pair:
#   client CPU (user, sys) of each run (`run.client_cpu` of the summary, getrusage),
#   tokens streamed (summary `total_output_tokens`),
#   CPU per streamed token = (cpu2 - cpu1) / (tokens2 - tokens1),
#   fixed cost per request  = (cpu1 - tokens1 * per_token) / N,
#   the recorded ITL p50/p99 of the L2 run against the configured STEP_MS,
# then the median and spread (min-max) over the pairs. The user/sys split (usr/tok) is
# getrusage's, tick-sampled: it swings from run to run on a busy machine; quote the total.
# Last, the kernel's floor on this host (scripts/stream-floor.py, FLOOR=1): a minimal reader
# with one recv per ready socket per epoll wake-up, as many streams open at once as the replay
# had (RATE x L2 x STEP_MS), its system time per token.
#
# Every run is bounded: the trace has N rows, --time-in-secs and `timeout`. Loopback only.
#
# Environment (defaults in brackets):
#   BIN_DIR [$CARGO_TARGET_DIR/release or target/release]  where request-sim and llm-sim are
#   N [400]           requests per run
#   RATE [100]        offered rate, req/s (the trace's timestamps are 1000/RATE ms apart)
#   L1 [32]           output tokens per request of the short run
#   L2 [512]          output tokens per request of the long run
#   INPUT [200]       prompt tokens per request
#   STEP_MS [2]       llm-sim's engine step: the configured inter-token latency, ms
#   REPEATS [3]       pairs of runs
#   SEED [7]          --seed of every replay (records comparable between builds)
#   PORT [19650]      llm-sim's port
#   EXTRA_ARGS []     more flags for `request-sim replay`
#   OUT [bench-results/stream-<UTC time>]  traces, records, summaries and logs
#   NO_BUILD [0]      1: do not run `cargo build --release`
#   FLOOR [1]         0: skip the kernel-floor row (needs python3)
# Needs: jq, awk, timeout; python3 for the floor row.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
N="${N:-400}"
RATE="${RATE:-100}"
L1="${L1:-32}"
L2="${L2:-512}"
INPUT="${INPUT:-200}"
STEP_MS="${STEP_MS:-2}"
REPEATS="${REPEATS:-3}"
SEED="${SEED:-7}"
PORT="${PORT:-19650}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
OUT="${OUT:-bench-results/stream-$(date -u +%Y%m%d-%H%M%S)}"

for tool in jq awk timeout; do
    command -v "$tool" >/dev/null || { echo "bench-stream.sh: $tool not found" >&2; exit 1; }
done
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-stream.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT"

# ---- the server: a separate process, so the client's CPU is measured alone ----
"$SIM" --host 127.0.0.1 --port "$PORT" --preset fast --step-fixed-ms "$STEP_MS" \
    --prefill-token-us 0 --decode-seq-us 0 --max-num-seqs 4096 --max-num-batched-tokens 1048576 \
    --worker-threads 1 2>"$OUT/llm-sim.log" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do
    grep -q 'listening on' "$OUT/llm-sim.log" 2>/dev/null && break
    sleep 0.05
done
grep -q 'listening on' "$OUT/llm-sim.log" || { echo "bench-stream.sh: llm-sim did not start" >&2; cat "$OUT/llm-sim.log" >&2; exit 1; }

# Generic traces: N rows 1000/RATE ms apart, INPUT prompt tokens, L output tokens.
for L in "$L1" "$L2"; do
    awk -v n="$N" -v r="$RATE" -v in_="$INPUT" -v l="$L" 'BEGIN {
        for (i = 0; i < n; i++)
            printf "{\"timestamp\": %.3f, \"input_length\": %d, \"output_length\": %d}\n", i * 1000 / r, in_, l }' \
        >"$OUT/trace-$L.jsonl"
done
limit=$(awk -v n="$N" -v r="$RATE" -v l="$L2" -v s="$STEP_MS" 'BEGIN { printf "%d", n / r + l * s / 1000 * 3 + 30 }')

# run NAME L: one replay; prints "user sys tokens p50_itl p99_itl scheduled records".
run_client() {
    local name="$1" L="$2" rec="$OUT/$1.jsonl"
    # shellcheck disable=SC2086
    if ! timeout $((limit + 30)) "$RS" replay --dataset-path "$OUT/trace-$L.jsonl" --quiet -o "$rec" \
        --endpoint "http://127.0.0.1:$PORT" --model-name llm-sim --chat-overhead 0 --seed "$SEED" \
        --no-server-metrics --time-in-secs "$limit" --grace-secs 10 $EXTRA_ARGS \
        >"$OUT/$name.out" 2>"$OUT/$name.err"; then
        echo "bench-stream.sh: run $name failed (see $OUT/$name.err)" >&2; tail -3 "$OUT/$name.err" >&2; return 1
    fi
    local records; records=$(grep -c . "$rec")
    jq -r --arg records "$records" '[.run.client_cpu.user_s, .run.client_cpu.sys_s, .total_output_tokens,
        .p50_itl_ms, .p99_itl_ms, .scheduled, ($records | tonumber), .failed] | @tsv' "$rec.summary.json"
}

echo "bench-stream.sh: $N requests at $RATE req/s, $INPUT prompt tokens, L1=$L1 / L2=$L2 output tokens, ITL configured $STEP_MS ms; $(uptime | sed 's/.*load/load/'); binaries $BIN_DIR; results in $OUT" >&2
printf '%-4s %8s %8s %8s %8s %9s %8s %9s %10s %9s %9s %s\n' pair user1_s sys1_s user2_s sys2_s tokens2 "us/tok" "usr/tok" "fixed_ms" itl_p50 itl_p99 "records"
pairs=""
for k in $(seq "$REPEATS"); do
    read -r u1 s1 t1 _ _ sch1 rec1 f1 < <(run_client "short-$k" "$L1") || continue
    read -r u2 s2 t2 p50 p99 sch2 rec2 f2 < <(run_client "long-$k" "$L2") || continue
    row=$(awk -v u1="$u1" -v s1="$s1" -v t1="$t1" -v u2="$u2" -v s2="$s2" -v t2="$t2" -v n="$N" 'BEGIN {
        c1 = u1 + s1; c2 = u2 + s2; per = (c2 - c1) / (t2 - t1); uper = (u2 - u1) / (t2 - t1)
        printf "%.3f %.3f %.3f %.3f %d %.3f %.3f %.4f", u1, s1, u2, s2, t2, per * 1e6, uper * 1e6, (c1 - t1 * per) / n * 1e3 }')
    read -r a b c d e per uper fixed <<<"$row"
    printf '%-4s %8s %8s %8s %8s %9s %8s %9s %10s %9.3f %9.3f %s\n' "$k" "$a" "$b" "$c" "$d" "$e" "$per" "$uper" "$fixed" \
        "$p50" "$p99" "$rec1/$sch1 $rec2/$sch2 failed $f1/$f2"
    pairs+="$per $uper $fixed $p50 $p99"$'\n'
done
[[ -n "$pairs" ]] || { echo "bench-stream.sh: every pair failed" >&2; exit 1; }
printf '%s' "$pairs" | awk -v step="$STEP_MS" '
    { for (i = 1; i <= 5; i++) v[i, NR] = $i }
    END {
        split("us/tok usr/tok fixed_ms itl_p50 itl_p99", name, " ")
        printf "median (min-max) over %d pairs:", NR
        for (i = 1; i <= 5; i++) {
            n = 0; for (j = 1; j <= NR; j++) a[++n] = v[i, j]
            for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
            med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            printf "  %s %.3f (%.3f-%.3f)", name[i], med, a[1], a[n]
        }
        printf "  [ITL configured %s ms]\n", step
    }'
if [[ "${FLOOR:-1}" == 1 ]] && command -v python3 >/dev/null; then
    conc=$(awk -v r="$RATE" -v l="$L2" -v s="$STEP_MS" -v n="$N" 'BEGIN { c = int(r * l * s / 1000 + 0.999); if (c < 1) c = 1; if (c > n) c = n; print c }')
    timeout 700 python3 "$ROOT/scripts/stream-floor.py" "$PORT" "$N" "$L1" "$L2" "$conc" llm-sim \
        || echo "bench-stream.sh: the kernel-floor reader failed" >&2
fi
