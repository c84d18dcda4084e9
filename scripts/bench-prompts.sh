#!/usr/bin/env bash
# Prompt exactness against a server that tokenizes with the real model tokenizer (llm-sim
# started with the Qwen3 tokenizer): real-text prompts (--prompt-corpus) on chat and
# completions endpoints with the local tokenizer, then word prompts with only the endpoint
# (the server's /tokenize). Prints, per run: server prompt_tokens == input_length, server
# prefix-cache hit ratio vs the trace-ideal, corpus share, start-up time. Loopback only,
# bounded (N requests, outputs capped at 16 tokens).
#
#   scripts/bench-prompts.sh CORPUS [TRACE] [N] [SCALE] [PORT]
#
# CORPUS: ShareGPT JSON, JSONL with a "text" field, or text (see docs/prompts.md).
# TRACE: default ../shared/traces/mooncake_conversation_trace.jsonl; N: its first N requests
# (default 1000); SCALE: --scale-factor (default 1: llm-sim tokenizes every prompt with the real
# tokenizer, ~40k tokens/s at scale 1 on the conversation trace). Needs scripts/fetch-tokenizer.sh.
# BENCH_NO_BUILD=1 uses the binaries already built.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS="${1:?usage: scripts/bench-prompts.sh CORPUS [TRACE] [N] [SCALE] [PORT]}"
TRACE="${2:-../shared/traces/mooncake_conversation_trace.jsonl}"
N="${3:-1000}"
SCALE="${4:-1}"
PORT="${5:-18779}"
QWEN="${REQUEST_SIM_QWEN3_DIR:-.cache/tokenizers/qwen3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release -q -p request-sim -p llm-sim
RS="$CARGO_TARGET_DIR/release/request-sim"
SIM="$CARGO_TARGET_DIR/release/llm-sim"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
head -n "$N" "$TRACE" > "$OUT/trace.jsonl"

start_sim() {
  # A cache large enough that nothing is evicted: the server's hit ratio is then comparable
  # with the trace-ideal (infinite cache).
  "$SIM" --port "$PORT" --tokenizer "$QWEN/tokenizer.json" --tokenizer-config "$QWEN/tokenizer_config.json" \
    --num-gpu-blocks 2000000 --max-num-batched-tokens 65536 --worker-threads 2 2>/dev/null &
  SIM_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return; sleep 0.1; done
  echo "llm-sim did not start" >&2; exit 1
}
stop_sim() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }

report() { # $1 = title, $2 = summary json
  python3 - "$1" "$2" <<'PY'
import json, sys
title, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
run, e, c = s["run"], s["token_exactness"], s["cache"]
st = run.get("startup") or {}
pc = run.get("prompt_corpus")
print(f"=== {title}")
print(f"  prompt tokens counted by: {run.get('prompt_token_source')}")
print(f"  server prompt_tokens == input_length: {e['exact']} / {e['with_usage']}"
      f" ({100.0 * e['exact'] / max(e['with_usage'], 1):.2f}%)")
if c.get("hit_ratio") is not None and c.get("ideal_hit_ratio") is not None:
    print(f"  prefix-cache hit ratio: server {100 * c['hit_ratio']:.2f}%, trace-ideal"
          f" {100 * c['ideal_hit_ratio']:.2f}% ({100 * (c['hit_ratio'] - c['ideal_hit_ratio']):+.2f} pp)")
if pc:
    print(f"  corpus: {pc['units']} units, {pc['tokens']} tokens, dropped {pc['dropped_shape']} by shape,"
          f" {pc['dropped_unstable']} unstable; corpus share {100 * pc['corpus_token_share']:.2f}%;"
          f" read+tokenize+check {pc['read_ms'] + pc['tokenize_ms'] + pc['check_ms']:.0f} ms")
print(f"  start-up: vocabulary {st.get('vocab_ms', 0):.0f} ms, total {st.get('total_ms', 0) / 1e3:.2f} s")
PY
}

start_sim
for api in chat completions; do
  path=/v1/chat/completions; [ "$api" = completions ] && path=/v1/completions
  seed=$RANDOM
  "$RS" replay --endpoint "http://127.0.0.1:$PORT$path" --dataset-path "$OUT/trace.jsonl" \
    --tokenizer "$QWEN" --prompt-corpus "$CORPUS" --seed "$seed" --scale-factor "$SCALE" \
    --max-output-tokens 16 --request-timeout 600 -q --no-server-metrics -o "$OUT/$api.jsonl" >/dev/null 2>"$OUT/$api.err" \
    || { cat "$OUT/$api.err" >&2; exit 1; }
  grep "prompt text:" "$OUT/$api.err" | sed 's/^/  /' || true
  report "real text ($CORPUS), $api, local tokenizer" "$OUT/$api.jsonl.summary.json"
done
seed=$RANDOM
"$RS" replay --endpoint "http://127.0.0.1:$PORT/v1/chat/completions" --dataset-path "$OUT/trace.jsonl" \
  --seed "$seed" --scale-factor "$SCALE" --max-output-tokens 16 --request-timeout 600 -q \
  --no-server-metrics -o "$OUT/endpoint.jsonl" >/dev/null 2>"$OUT/endpoint.err" || { cat "$OUT/endpoint.err" >&2; exit 1; }
grep "prompt tokens:" "$OUT/endpoint.err" | sed 's/^/  /' || true
report "word prompts, chat, endpoint only (server /tokenize)" "$OUT/endpoint.jsonl.summary.json"
stop_sim
