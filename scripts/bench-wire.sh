#!/usr/bin/env bash
# Measurement truth on the wire (issue 59, docs/performance.md "Measured on the wire"):
# vllm-bench's bench-overhead experiment with request-sim and vllm-bench side by side.
#
#   scripts/bench-wire.sh                      # 100 500 1000 2000 streams, 3 alternated trials
#   STREAMS="100 1000" TRIALS=1 scripts/bench-wire.sh
#
# The experiment: vllm-bench's mock server (bench-overhead/mock-server) streams 100 tokens per
# request, the first after 50 ms, then one every 10 ms. C requests start at once (32-token
# prompts, 100 output tokens, /v1/completions, streamed). tcpdump on loopback timestamps each
# request and each token-carrying segment (scripts/wire.py reads the capture), so the wire is
# the clock: what a client adds to TTFT is its mean TTFT minus the wire's for the same run, and
# the server's own lateness is the wire's TTFT minus 50 ms. CPU and RSS from /usr/bin/time; the
# client's peak descriptors and connections to the server sampled every 0.2 s (watch_client).
#
# Everything runs in a network namespace of its own (unshare -n: only its loopback), so the
# mock server's 0.0.0.0 listener reaches nothing. vllm-bench is fetched and built here
# (VLLM_BENCH_SRC: a checkout, default .cache/vllm-bench/src, cloned from GitHub when absent;
# built in .cache/vllm-bench/target); it is not a dependency. Needs root (unshare, tcpdump).
# Environment: STREAMS, TRIALS (3), CLIENTS ("request-sim vllm-bench"; also request-sim+raise
# and request-sim+off, see rs_variant), RS_ARGS (more replay flags), MOCK_ARGS (the mock
# server's, e.g. "--token-interval-ms 100"), REQUEST_SIM (target/release/request-sim), OUT
# (bench-results/wire-<time>), TOKDIR (the Qwen3 tokenizer vllm-bench counts prompts with).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STREAMS="${STREAMS:-100 500 1000 2000}"
TRIALS="${TRIALS:-3}"
RS="${REQUEST_SIM:-$ROOT/target/release/request-sim}"
VB_SRC="${VLLM_BENCH_SRC:-$ROOT/.cache/vllm-bench/src}"
VB_TARGET="$ROOT/.cache/vllm-bench/target"
TOKDIR="${TOKDIR:-$ROOT/.cache/tokenizers/qwen3}"
PORT=8089
log() { echo "bench-wire.sh: $(date +%T) $*" >&2; }

if [[ "${BENCH_WIRE_INSIDE:-0}" != 1 ]]; then
    OUT="${OUT:-$ROOT/bench-results/wire-$(date -u +%Y%m%dT%H%M%S)}"
    mkdir -p "$OUT"
    [[ -d "$VB_SRC" ]] || git clone -q https://github.com/vllm-project/vllm-bench "$VB_SRC"
    log "building vllm-bench and its mock server (release, $VB_TARGET)"
    (cd "$VB_SRC" && CARGO_TARGET_DIR="$VB_TARGET" cargo build --release -q)
    (cd "$VB_SRC/bench-overhead/mock-server" && CARGO_TARGET_DIR="$VB_TARGET" cargo build --release -q)
    [[ -x "$RS" ]] || (cd "$ROOT" && cargo build --release -q -p request-sim --bin request-sim)
    [[ -f "$TOKDIR/tokenizer.json" ]] || bash "$ROOT/scripts/fetch-tokenizer.sh" >&2
    command -v tcpdump >/dev/null || { log "needs tcpdump (apt-get install tcpdump)"; exit 1; }
    exec env BENCH_WIRE_INSIDE=1 OUT="$OUT" unshare -n bash "$0"
fi

# Inside the namespace. 10,000 streams need 10,000 descriptors on each side.
ip link set lo up
ulimit -n "$(ulimit -Hn)"
MOCK="$VB_TARGET/release/mock-llm-server"
VB="$VB_TARGET/release/vllm-bench"
ROWS="$OUT/rows.jsonl"
: >"$ROWS"

start_mock() {
    "$MOCK" --port "$PORT" ${MOCK_ARGS:-} >"$1/mock.log" 2>&1 &
    MOCK_PID=$!
    local t0=$SECONDS
    until curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; do
        ((SECONDS - t0 < 20)) || { log "mock server not up"; exit 1; }
        sleep 0.1
    done
}

# request-sim's variants: request-sim (as shipped), request-sim+raise (--realtime on: the I/O
# threads raised even though the server is on this host), request-sim+off (--realtime off
# --no-keep-awake).
rs_variant() {
    case "$1" in
        request-sim+raise) echo "--realtime on" ;;
        request-sim+off) echo "--realtime off --no-keep-awake" ;;
    esac
}

# The client's peak open descriptors and connections to the server (each its own local port),
# sampled every 0.2 s while it runs, into DIR/peaks.txt ("fds ports").
watch_client() {
    local name="$1" dir="$2" pid="" fds=0 ports=0 n
    for _ in $(seq 1 50); do pid="$(pgrep -nx "$name" || true)"; [[ -n "$pid" ]] && break; sleep 0.1; done
    while [[ -n "$pid" && -d "/proc/$pid" ]]; do
        n="$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)"; ((n > fds)) && fds=$n
        n="$(ss -Htn state established "( dport = :$PORT )" 2>/dev/null | wc -l)"; ((n > ports)) && ports=$n
        sleep 0.2
    done
    echo "$fds $ports" >"$dir/peaks.txt"
}

# One trial of one client at C streams: capture, run, then a row (scripts/bench-wire-row.py).
trial() {
    local client="$1" c="$2" n="$3" dir="$OUT/c$2-t$3-$1"
    mkdir -p "$dir"
    start_mock "$dir"
    tcpdump -i lo -s 0 --time-stamp-precision=nano -w "$dir/wire.pcap" "tcp port $PORT" \
        >"$dir/tcpdump.log" 2>&1 &
    local td=$!
    sleep 0.5
    case "$client" in
        request-sim*)
            python3 -c "
import json, sys
for i in range($c):
    print(json.dumps({'timestamp': 0, 'input_length': 32, 'output_length': 100, 'hash_ids': [i]}))
" >"$dir/trace.jsonl"
            watch_client request-sim "$dir" & WATCH=$!
            /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$RS" replay \
                --endpoint "http://127.0.0.1:$PORT/v1/completions" --dataset-path "$dir/trace.jsonl" \
                --stream --quiet --no-server-metrics --allow-inexact-prompts -o "$dir/records.jsonl" \
                --result-dir "$dir/result" ${RS_ARGS:-} $(rs_variant "$client") >"$dir/console.txt" 2>"$dir/stderr.txt" || true
            ;;
        vllm-bench)
            watch_client vllm-bench "$dir" & WATCH=$!
            /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$VB" --backend openai \
                --base-url "http://127.0.0.1:$PORT" --model mock-model --tokenizer "$TOKDIR" \
                --dataset-name random --random-input-len 32 --random-output-len 100 \
                --num-prompts "$c" --max-concurrency "$c" --disable-tqdm --save-result \
                --result-dir "$dir/result" --ready-check-timeout-sec 10 --num-warmups 0 \
                --percentile-metrics ttft,tpot,itl,e2el >"$dir/console.txt" 2>"$dir/stderr.txt" || true
            ;;
    esac
    wait "$WATCH" 2>/dev/null || true
    sleep 0.3
    kill -INT "$td" 2>/dev/null || true
    wait "$td" 2>/dev/null || true
    kill "$MOCK_PID" 2>/dev/null || true
    wait "$MOCK_PID" 2>/dev/null || true
    python3 "$ROOT/scripts/bench-wire-row.py" "$dir" "$client" "$c" "$n" "$PORT" >>"$ROWS"
    tail -n1 "$ROWS" >&2
}

for c in $STREAMS; do
    for n in $(seq 1 "$TRIALS"); do
        # Alternated: who goes first changes with each trial.
        order="${CLIENTS:-request-sim vllm-bench}"
        ((n % 2)) || order="$(echo "$order" | awk '{for (i = NF; i > 0; i--) printf "%s ", $i}')"
        for client in $order; do trial "$client" "$c" "$n"; done
    done
done
python3 "$ROOT/scripts/bench-wire-row.py" --table "$ROWS" | tee "$OUT/table.md"
