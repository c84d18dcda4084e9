#!/usr/bin/env bash
# Measures llm-sim's own cost: CPU per request and 1,000 concurrent streaming requests on one
# core. Loopback only, bounded in count and time. Builds the release binary and bench client
# once. Usage: scripts/bench-llm-sim.sh [PORT]
# BENCH_NICE=-10 runs server and client at a higher priority (root only), to see the simulator's
# timing when it gets its core on a machine busy with other work.
# BENCH_ONLY=4 runs only the real-tokenizer comparison (issue #30): llm-sim with the Qwen3
# tokenizer against the built-in vocabulary, PAIRS (default 4) alternated pairs of replays by
# request-sim, and a table of client TTFT mean/median, TPOT median and llm-sim's CPU per request.
# NO_BUILD=1 uses the binaries already built; LLM_SIM=… / REQUEST_SIM=… point at other builds.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-18777}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
ONLY="${BENCH_ONLY:-0123}"   # which runs to do, e.g. BENCH_ONLY=23
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release -q -p llm-sim --bin llm-sim --example bench_client
  [[ $ONLY == *4* ]] && cargo build --release -q -p request-sim --bin request-sim
fi
BIN="${LLM_SIM:-$CARGO_TARGET_DIR/release/llm-sim}"
CLIENT="$CARGO_TARGET_DIR/release/examples/bench_client"
TCK="$(getconf CLK_TCK)"
PIN_SERVER=""; PIN_CLIENT=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  PIN_SERVER="taskset -c 1"; PIN_CLIENT="taskset -c 0"
fi
if [ -n "${BENCH_NICE:-}" ]; then
  PIN_SERVER="nice -n $BENCH_NICE $PIN_SERVER"; PIN_CLIENT="nice -n $BENCH_NICE $PIN_CLIENT"
fi

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

# 4. Timing with a real tokenizer (issue #30): the same replay against llm-sim with the Qwen3
#    tokenizer and chat template, then with the built-in vocabulary, alternated PAIRS times: 100
#    conversation-trace requests at --scale-factor 4, 64 output tokens, streaming chat, request-sim
#    with the Qwen3 tokenizer (so both servers get the same bodies). Server and client are not
#    pinned (they share the cores, as a user runs them). llm-sim's CPU per request is its user +
#    system time over the replay (/proc/PID/stat) ÷ 100.
tokenizer_pairs() {
  local qwen="${QWEN3_DIR:-.cache/tokenizers/qwen3}"
  local trace="${TRACE:-/work/shared/traces/mooncake_conversation_trace.jsonl}"
  local rs="${REQUEST_SIM:-$CARGO_TARGET_DIR/release/request-sim}"
  [ -f "$qwen/tokenizer.json" ] || { echo "no Qwen3 tokenizer in $qwen (scripts/fetch-tokenizer.sh)" >&2; return 1; }
  [ -f "$trace" ] || { echo "no trace at $trace (set TRACE=...)" >&2; return 1; }
  local work; work="$(mktemp -d)"
  echo "=== llm-sim with the Qwen3 tokenizer vs the built-in vocabulary (${PAIRS:-4} alternated pairs)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf '%-5s %-8s %10s %10s %10s %12s %8s\n' pair server ttft_mean ttft_p50 tpot_p50 cpu_ms/req exact
  local p kind
  for p in $(seq 1 "${PAIRS:-4}"); do
    for kind in qwen3 builtin; do
      local sflags=(--port "$PORT")
      [ "$kind" = qwen3 ] && sflags+=(--tokenizer "$qwen/tokenizer.json" --tokenizer-config "$qwen/tokenizer_config.json")
      ${BENCH_NICE:+nice -n $BENCH_NICE} "$BIN" "${sflags[@]}" >"$work/sim.log" 2>&1 &
      local pid=$!
      trap 'kill $pid 2>/dev/null || true' EXIT
      for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done
      local before; before="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
      local out="$work/$kind-$p.jsonl"
      if ! timeout 300 ${BENCH_NICE:+nice -n $BENCH_NICE} "$rs" replay \
          --endpoint "http://127.0.0.1:$PORT/v1/chat/completions" --dataset-path "$trace" \
          --max-requests 100 --scale-factor 4 --max-output-tokens 64 --tokenizer "$qwen" \
          --no-server-metrics -q -o "$out" >"$work/replay.log" 2>&1; then
        echo "replay failed: $(tail -1 "$work/replay.log")"
      fi
      local after; after="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
      kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
      trap - EXIT
      python3 - "$out.summary.json" "$p" "$kind" "$before" "$after" "$TCK" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
cpu_ms = (float(sys.argv[5]) - float(sys.argv[4])) * 1000.0 / float(sys.argv[6]) / max(s["completed"], 1)
e = s["token_exactness"]
print(f"{sys.argv[2]:<5} {sys.argv[3]:<8} {s['mean_ttft_ms']:10.2f} {s['median_ttft_ms']:10.2f} "
      f"{s['median_tpot_ms']:10.3f} {cpu_ms:12.2f} {e['exact']:>4}/{e['with_usage']}")
PY
    done
  done | tee "$work/table.txt"
  python3 - "$work/table.txt" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
by = {}
for r in rows:
    by.setdefault(r[1], []).append([float(x) for x in r[2:6]])
if {"qwen3", "builtin"} <= by.keys():
    q = [st.mean(c) for c in zip(*by["qwen3"])]
    b = [st.mean(c) for c in zip(*by["builtin"])]
    names = ["TTFT mean", "TTFT median", "TPOT median", "llm-sim CPU/req"]
    print("averages over the pairs (Qwen3 vs built-in):")
    for n, x, y in zip(names, q, b):
        print(f"  {n:<16} {x:8.2f} vs {y:8.2f} ms  ({100.0 * (x - y) / y:+.1f}%)")
PY
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$work"
}
[[ $ONLY == *4* ]] && tokenizer_pairs
true
