#!/usr/bin/env bash
# Check `--api vllm-grpc` against real vLLM 0.32 (CPU) on this machine; not run in CI.
#
#   scripts/vllm-grpc-check.sh        # trace, vLLM --grpc, replay, then vLLM over HTTP, replay
#
# (a) a 200-row Mooncake-shaped trace (block 512, prompts <= 1500 tokens sharing their first
#     blocks, 16-32 output tokens, Poisson arrivals at $RATE req/s), seeded;
# (b) `vllm serve --grpc` (smg-grpc-servicer installed into vLLM's venv if missing), ready when
#     its log says "Server is ready to accept requests" and its planned warm-up, when it runs
#     one, is over (the gRPC port has no HTTP /health or
#     /metrics); the slice replayed with --api vllm-grpc --token-ids --tokenizer;
# (c) the same slice against a fresh `vllm serve` over HTTP (/v1/completions --token-ids), with
#     vLLM's prefix_cache_hits_total read before and after;
# (d) a table: records, exact prompts, cached tokens (gRPC records, HTTP records, HTTP
#     counter), TTFT / ITL / E2EL p50 and p90 of both runs.
# Environment: PORT (18610), RATE (3), ROWS (200), OUT (.cache/vllm/runs/grpc-<time>),
# REQUEST_SIM (target/release/request-sim).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VLLM_CACHE:-$ROOT/.cache/vllm}"
VENV="$CACHE/venv"
MODEL="$CACHE/qwen3-tiny-random"
TOKDIR="$ROOT/.cache/tokenizers/qwen3"
PORT="${PORT:-18610}"
RATE="${RATE:-3}"
ROWS="${ROWS:-200}"
OUT="${OUT:-$CACHE/runs/grpc-$(date -u +%Y%m%dT%H%M%S)}"
RS="${REQUEST_SIM:-$ROOT/target/release/request-sim}"
SERVER_PID=""
mkdir -p "$OUT"
log() { echo "vllm-grpc-check.sh: $(date +%T) $*" >&2; }

[[ -x "$VENV/bin/vllm" ]] || bash "$ROOT/scripts/vllm-install.sh"
"$VENV/bin/python" -c 'import smg_grpc_servicer' 2>/dev/null || "$VENV/bin/pip" install -q smg-grpc-servicer
[[ -x "$RS" ]] || (cd "$ROOT" && cargo build --release -q -p request-sim)

# (a) the trace.
python3 - "$OUT/trace.jsonl" "$ROWS" "$RATE" <<'PY'
import json, random, sys
path, rows, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(54)
t, next_id, out = 0.0, 1000, []
roots = [[i * 10 + j for j in range(2)] for i in range(8)]   # 8 shared 2-block prefixes
for _ in range(rows):
    t += rng.expovariate(rate) * 1000
    blocks = roots[rng.randrange(len(roots))][: rng.randint(1, 2)]
    total = rng.randint(len(blocks) * 512 + 1, min(1500, len(blocks) * 512 + 511))
    ids = list(blocks) + [next_id + k for k in range(-(-total // 512) - len(blocks))]
    next_id += 10
    out.append({"timestamp": round(t, 3), "input_length": total,
                "output_length": rng.randint(16, 32), "hash_ids": ids})
with open(path, "w") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
PY

serve() {  # serve NAME EXTRA...: vLLM on $PORT, its log $OUT/NAME.log
    local name="$1"; shift
    (cd "$CACHE" && VLLM_CPU_KVCACHE_SPACE=1 exec "$VENV/bin/vllm" serve "$MODEL" \
        --served-model-name qwen3 --host 127.0.0.1 --port "$PORT" --block-size 32 \
        --enable-prefix-caching --enable-prompt-tokens-details --max-model-len 8192 "$@") \
        >"$OUT/$name.log" 2>&1 &
    SERVER_PID=$!
}
stop() { [[ -z "$SERVER_PID" ]] || { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }; }
trap stop EXIT
wait_for() {  # wait_for NAME TEST
    local t0=$SECONDS
    until eval "$2"; do
        kill -0 "$SERVER_PID" 2>/dev/null || { log "vllm exited: $OUT/$1.log"; tail -20 "$OUT/$1.log" >&2; exit 1; }
        ((SECONDS - t0 < 900)) || { log "vllm not ready in 900 s"; exit 1; }
        sleep 2
    done
    log "$1 ready in $((SECONDS - t0)) s"
}
replay() {  # replay NAME ARGS...
    local name="$1"; shift
    "$RS" replay --dataset-path "$OUT/trace.jsonl" --tokenizer "$TOKDIR" --token-ids \
        --output-path "$OUT/$name.records.jsonl" --seed 54 --record-itl --no-server-metrics \
        "$@" >"$OUT/$name.replay.log" 2>&1 || log "$name replay exited $?"
}
hits() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '/^vllm:prefix_cache_hits_total/ {s+=$2} END {printf "%d", s}'; }

# (b) gRPC.
serve grpc --grpc
wait_for grpc 'grep -q "Server is ready to accept requests" "$OUT/grpc.log"'
# vLLM's gRPC server may run its planned warm-up (a decode staircase of 128 requests, ~20 s
# here) after that line: requests sent meanwhile queue behind it (seen: TTFT ~360 ms for the
# first 15 s instead of ~33 ms). Wait for it to end when it started.
wait_for grpc '! grep -q "Planned warm-up starts" "$OUT/grpc.log" || grep -q "Planned warm-up over" "$OUT/grpc.log"'
replay grpc --api vllm-grpc --endpoint "grpc://127.0.0.1:$PORT"
stop

# (c) HTTP, a fresh server (an empty prefix cache, as the gRPC run had).
serve http
wait_for http 'curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null'
H0=$(hits)
replay http --endpoint "http://127.0.0.1:$PORT/v1/completions" --model-name qwen3
H1=$(hits)
stop

# (d) the table.
python3 - "$OUT" "$((H1 - H0))" <<'PY'
import json, sys, statistics as st
out, counter = sys.argv[1], int(sys.argv[2])
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
print(f"{'run':6} {'records':>7} {'ok':>4} {'exact':>6} {'cached':>7} {'ttft p50/p90':>14} {'itl p50/p90':>12} {'e2el p50/p90':>14}")
for name in ("grpc", "http"):
    rs = [json.loads(l) for l in open(f"{out}/{name}.records.jsonl")]
    ok = [r for r in rs if r["status"] == "ok"]
    exact = sum(r.get("prompt_tokens") == r["input_length"] for r in ok)
    cached = sum(r.get("cached_tokens") or 0 for r in ok)
    ttft = [r["ttft_ms"] for r in ok]; e2e = [r["e2e_ms"] for r in ok]
    itl = [g for r in ok for g in (r.get("itl_ms") or [])]
    print(f"{name:6} {len(rs):7} {len(ok):4} {exact:6} {cached:7} {q(ttft,.5):6.1f}/{q(ttft,.9):6.1f} {q(itl,.5):5.1f}/{q(itl,.9):5.1f} {q(e2e,.5):6.1f}/{q(e2e,.9):6.1f}")
print(f"HTTP run: vLLM prefix_cache_hits_total grew by {counter}")
PY
log "records and logs in $OUT"
