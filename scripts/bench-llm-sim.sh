#!/usr/bin/env bash
# Measures llm-sim's own cost: CPU per request and 1,000 concurrent streaming requests on one
# core. Loopback only, bounded in count and time. Builds the release binary and bench client
# once. Usage: scripts/bench-llm-sim.sh [PORT]
# BENCH_NICE=-10 runs server and client at a higher priority (root only), to see the simulator's
# timing when it gets its core on a machine busy with other work.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-18777}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p llm-sim --bin llm-sim --example bench_client
BIN="$CARGO_TARGET_DIR/release/llm-sim"
CLIENT="$CARGO_TARGET_DIR/release/examples/bench_client"
TCK="$(getconf CLK_TCK)"
PIN_SERVER=""; PIN_CLIENT=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  PIN_SERVER="taskset -c 1"; PIN_CLIENT="taskset -c 0"
fi
if [ -n "${BENCH_NICE:-}" ]; then
  PIN_SERVER="nice -n $BENCH_NICE $PIN_SERVER"; PIN_CLIENT="nice -n $BENCH_NICE $PIN_CLIENT"
fi
ONLY="${BENCH_ONLY:-0123}"   # which runs to do, e.g. BENCH_ONLY=23

run() { # $1 = title, then server flags, "--", client flags
  local title="$1"; shift
  local sflags=(); while [ "$1" != "--" ]; do sflags+=("$1"); shift; done; shift
  $PIN_SERVER "$BIN" --port "$PORT" "${sflags[@]}" 2>/dev/null &
  local pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done
  echo "=== $title"
  echo "server: llm-sim ${sflags[*]}"
  timeout 300 $PIN_CLIENT "$CLIENT" --url "http://127.0.0.1:$PORT" --server-pid "$pid" --clk-tck "$TCK" "$@" || true
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  trap - EXIT
  echo
}

# 0. Fixed cost of a request: one output token each.
[[ $ONLY == *0* ]] && run "fixed cost per request (2000 requests, 1 token out, concurrency 64)" \
  --max-num-seqs 256 -- --requests 2000 --concurrency 64 --prompt-words 200 --max-tokens 1

# 1. CPU per request at moderate load: 2,000 requests, 64 in flight, 200-token prompts, 100 tokens out.
[[ $ONLY == *1* ]] && run "cost per request (2000 requests, concurrency 64)" \
  --max-num-seqs 256 -- --requests 2000 --concurrency 64 --prompt-words 200 --max-tokens 100

# 2. 1,000 concurrent streams on one core: all admitted at once (max-num-seqs 1024),
#    5 ms + 10 us/seq steps (15 ms per token at 1,000 streams), 200 tokens each.
[[ $ONLY == *2* ]] && run "1000 concurrent streams" \
  --max-num-seqs 1024 --max-num-batched-tokens 300000 --step-fixed-ms 5 --decode-seq-us 10 \
  -- --requests 1000 --concurrency 1000 --prompt-words 200 --max-tokens 200

# 3. The same with the default fast preset (1 ms + 2 us/seq: 3 ms steps), the worst case for CPU.
[[ $ONLY == *3* ]] && run "1000 concurrent streams, fast preset" \
  --max-num-seqs 1024 --max-num-batched-tokens 300000 \
  -- --requests 1000 --concurrency 1000 --prompt-words 200 --max-tokens 200
true
