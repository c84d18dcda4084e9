#!/usr/bin/env bash
# Check request-sim's prompt exactness against a real llama.cpp `llama-server`.
#
#   scripts/llama-server.sh              # build (once), make the model (once), run the checks
#   scripts/llama-server.sh --build-only # only build llama-server into .cache/llama.cpp/
#   REQUEST_SIM=path/to/request-sim scripts/llama-server.sh   # check another build
#
# Not run in CI: the build compiles llama.cpp for ~10-20 minutes on two cores. Steps:
#  (a) download the llama-cpp-python sdist from PyPI and build `llama-server` from the llama.cpp
#      sources it vendors (CPU only, Release, no network features) into .cache/llama.cpp/bin;
#  (b) write a tiny random-weight Qwen3 GGUF around the real Qwen3 tokenizer
#      (scripts/fetch-tokenizer.sh, `pip install gguf numpy`) into .cache/llama.cpp/;
#  (c) start llama-server on 127.0.0.1 with --metrics and replay 60 conversation-trace requests
#      (shrunk to fit the model's context, 4 output tokens) on chat completions and completions,
#      with only the endpoint and with --tokenizer, streaming and not, then on OpenAI Responses
#      (/v1/responses) and Anthropic Messages (/v1/messages) the same way, printing each run's
#      exact-match share and its cached tokens as the responses reported them next to what the
#      server's own counters imply; then an agent corpus (the Weka test fixtures) on Messages
#      and chat, and a log converted by `request-sim convert` sent as its kept text.
# Environment: JOBS (cmake build jobs, default 2), NICE (default 19), PORT (default 18431),
# TRACE (default /work/shared/traces/mooncake_conversation_trace.jsonl or
# request-sim/tests/data/*), REQUESTS (default 60), KEEP (1: leave the server running).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/llama.cpp"
SERVER="$CACHE/bin/llama-server"
MODEL="$CACHE/qwen3-tiny-random.gguf"
TOKDIR="$ROOT/.cache/tokenizers/qwen3"
JOBS="${JOBS:-2}"
NICE="${NICE:-19}"
PORT="${PORT:-18431}"
REQUESTS="${REQUESTS:-60}"
BUILD_ONLY=0
[[ "${1:-}" == "--build-only" ]] && BUILD_ONLY=1

log() { echo "llama-server.sh: $*" >&2; }

# (a) Build llama-server from the llama.cpp vendored in the llama-cpp-python sdist.
build_server() {
    if [[ -x "$SERVER" ]]; then
        log "llama-server already built: $SERVER"
        return
    fi
    command -v cmake >/dev/null || { log "cmake not found (apt-get install cmake)"; exit 1; }
    mkdir -p "$CACHE/src"
    local sdist
    sdist="$(ls "$CACHE"/src/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1 || true)"
    if [[ -z "$sdist" ]]; then
        log "downloading the llama-cpp-python sdist"
        pip download --no-binary :all: --no-deps llama-cpp-python -d "$CACHE/src" >&2
        sdist="$(ls "$CACHE"/src/llama_cpp_python-*.tar.gz | head -n1)"
    fi
    local dir="${sdist%.tar.gz}"
    [[ -d "$dir" ]] || tar -xzf "$sdist" -C "$CACHE/src"
    local llama="$dir/vendor/llama.cpp"
    [[ -f "$llama/CMakeLists.txt" ]] || { log "no vendor/llama.cpp in $sdist"; exit 1; }
    log "building llama-server from $llama (nice $NICE, $JOBS jobs)"
    nice -n "$NICE" cmake -S "$llama" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF >&2
    nice -n "$NICE" cmake --build "$CACHE/build" --config Release --target llama-server \
        -j "$JOBS" >&2
    mkdir -p "$CACHE/bin"
    cp "$CACHE/build/bin/llama-server" "$SERVER"
    log "built $SERVER"
}

build_server
[[ $BUILD_ONLY -eq 1 ]] && exit 0

# (b) A tiny random-weight Qwen3 GGUF around the real Qwen3 tokenizer.
make_model() {
    if [[ -s "$MODEL" ]]; then
        log "model already written: $MODEL"
        return
    fi
    "$ROOT/scripts/fetch-tokenizer.sh" >&2
    python3 -c 'import gguf, numpy' 2>/dev/null || pip install --quiet gguf numpy >&2
    log "writing $MODEL"
    python3 - "$TOKDIR" "$MODEL" <<'PY'
import json, sys
import numpy as np
import gguf

tokdir, out = sys.argv[1], sys.argv[2]
tj = json.load(open(f"{tokdir}/tokenizer.json", encoding="utf-8"))
tc = json.load(open(f"{tokdir}/tokenizer_config.json", encoding="utf-8"))
vocab = tj["model"]["vocab"]
added = {t["id"]: t for t in tj.get("added_tokens", [])}
n_vocab = max(list(vocab.values()) + list(added)) + 1
tokens = [f"[PAD{i}]" for i in range(n_vocab)]
types = [gguf.TokenType.UNUSED] * n_vocab
for text, i in vocab.items():
    tokens[i], types[i] = text, gguf.TokenType.NORMAL
for i, t in added.items():
    tokens[i] = t["content"]
    types[i] = gguf.TokenType.CONTROL if t.get("special") else gguf.TokenType.USER_DEFINED
merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
ids = {t["content"]: i for i, t in added.items()}

# Small: 2 layers, hidden 64, 4 query heads and 2 KV heads of 16, FFN 128, tied embeddings.
n_embd, n_layer, n_head, n_kv, head, n_ff, ctx = 64, 2, 4, 2, 16, 128, 32768
w = gguf.GGUFWriter(out, "qwen3")
w.add_name("qwen3-tiny-random")
w.add_context_length(ctx)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_kv)
w.add_key_length(head)
w.add_value_length(head)
w.add_rope_freq_base(1e6)
w.add_layer_norm_rms_eps(1e-6)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen2")
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(merges)
w.add_eos_token_id(ids.get("<|im_end|>", ids.get("<|endoftext|>", 0)))
w.add_pad_token_id(ids.get("<|endoftext|>", 0))
w.add_bos_token_id(ids.get("<|endoftext|>", 0))
w.add_add_bos_token(False)
if tc.get("chat_template"):
    w.add_chat_template(tc["chat_template"])

rng = np.random.default_rng(0)
def t(name, *shape):
    w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))
def ones(name, n):
    w.add_tensor(name, np.ones(n, dtype=np.float32))
t("token_embd.weight", n_vocab, n_embd)
ones("output_norm.weight", n_embd)
for b in range(n_layer):
    p = f"blk.{b}."
    ones(p + "attn_norm.weight", n_embd)
    t(p + "attn_q.weight", n_head * head, n_embd)
    t(p + "attn_k.weight", n_kv * head, n_embd)
    t(p + "attn_v.weight", n_kv * head, n_embd)
    t(p + "attn_output.weight", n_embd, n_head * head)
    ones(p + "attn_q_norm.weight", head)
    ones(p + "attn_k_norm.weight", head)
    ones(p + "ffn_norm.weight", n_embd)
    t(p + "ffn_gate.weight", n_ff, n_embd)
    t(p + "ffn_up.weight", n_ff, n_embd)
    t(p + "ffn_down.weight", n_embd, n_ff)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"n_vocab {n_vocab}, {len(merges)} merges", file=sys.stderr)
PY
}

# (c) llama-server on 127.0.0.1 and the exactness checks.
SERVER_PID=""
stop_server() {
    if [[ -n "$SERVER_PID" && "${KEEP:-0}" != 1 ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}

start_server() {
    log "starting llama-server on 127.0.0.1:$PORT"
    "$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" --metrics -c 32768 -np 4 -t 2 \
        --jinja >"$CACHE/server.log" 2>&1 &
    SERVER_PID=$!
    trap stop_server EXIT
    for _ in $(seq 1 120); do
        if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
            return
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { log "llama-server exited:"; tail -20 "$CACHE/server.log" >&2; exit 1; }
        sleep 1
    done
    log "llama-server did not become healthy; see $CACHE/server.log"
    exit 1
}

# The first $REQUESTS rows of the trace, 16x shorter (hash blocks of 32 tokens instead of 512,
# the same blocks), so prompts fit the tiny model's context.
shrink_trace() {
    local src="$1" dst="$2"
    python3 - "$src" "$dst" "$REQUESTS" <<'PY'
import json, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(src) as f, open(dst, "w") as o:
    for k, line in enumerate(f):
        if k >= n:
            break
        r = json.loads(line)
        r["input_length"] = (r["input_length"] + 15) // 16
        o.write(json.dumps(r) + "\n")
PY
}

# llama.cpp's counter of computed prompt tokens (0 when the page has none).
prompt_tokens_total() {
    { curl -sf "http://127.0.0.1:$PORT/metrics" || true; } | awk '$1 == "llamacpp:prompt_tokens_total" {print $2; f=1} END {if (!f) print 0}'
}
# One replay; prints the exact-match share of server prompt_tokens against input_length.
check() {
    local label="$1" path="$2"
    shift 2
    local out="$WORK/$label.jsonl"
    local before
    before="$(prompt_tokens_total)"
    # CHECK_DATASET: another dataset (an agent corpus), replayed at its own timing.
    local shape=(--dataset-path "$WORK/trace.jsonl" --block-size 32 --scale-factor 20)
    [[ -n "${CHECK_DATASET:-}" ]] && shape=(--dataset-path "$CHECK_DATASET")
    if ! "$RS" replay --endpoint "http://127.0.0.1:$PORT$path" "${shape[@]}" \
        --max-output-tokens 4 --no-pin -q -o "$out" "$@" \
        >"$WORK/$label.log" 2>&1; then
        printf '%-34s refused or failed: %s\n' "$label" "$(grep -v '^$' "$WORK/$label.log" | tail -1)"
        return
    fi
    local after
    after="$(prompt_tokens_total)"
    python3 - "$out.summary.json" "$label" "$before" "$after" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
e, run, c = s["token_exactness"], s["run"], s.get("cache", {})
share = 100.0 * e["exact"] / e["with_usage"] if e["with_usage"] else float("nan")
# Completed requests whose answer carried no prompt tokens (llama.cpp leaves a Messages stream's
# message_start out when its first token ends inside a UTF-8 character): not in `exact`.
missing = e.get("without_usage", 0)
print(f"{sys.argv[2]:<34} exact {e['exact']}/{e['with_usage']} ({share:.1f}%), over {e['over']}, "
      f"under {e['under']}, max |diff| {e['max_abs_diff']}; no prompt usage {missing}; "
      f"overhead {run.get('chat_overhead')}; source: {run.get('prompt_token_source')}")
# llama.cpp's prompt_tokens_total counts the prompt tokens it computed, not those it took from
# its cache: over the run, prompt tokens - computed = the server's cached tokens (the start-up
# calibration requests, a few short prompts, are inside the server's count).
before, after = float(sys.argv[3]), float(sys.argv[4])
computed = after - before
prompt, cached = c.get("prompt_tokens", 0), c.get("cached_tokens", 0)
if c.get("requests_with_cached_tokens") and prompt:
    print(f"{'':<34} cached tokens: client {cached}/{prompt} ({100.0 * cached / prompt:.2f}%), "
          f"server counters {prompt - computed:.0f}/{prompt} ({100.0 * (prompt - computed) / prompt:.2f}%)")
else:
    print(f"{'':<34} cached tokens: the responses gave none")
PY
}

# convert (issue 28): a log converted with the Qwen3 tokenizer and template; its --keep-text
# messages trace sent as written; every server prompt_tokens must equal the converted
# input_length of the same request.
check_convert() {
    local log="$ROOT/request-sim/tests/data/logs/openai.jsonl"
    "$RS" convert "$log" -o "$WORK/converted.jsonl" --keep-text "$WORK/converted_text.jsonl" \
        --tokenizer "$TOKDIR" --block-size 16 --no-analyze >"$WORK/convert.log" 2>&1 \
        || { printf '%-34s failed: %s\n' convert "$(tail -1 "$WORK/convert.log")"; return; }
    "$RS" replay --endpoint "http://127.0.0.1:$PORT/v1/chat/completions" \
        --dataset-path "$WORK/converted_text.jsonl" --max-output-tokens 4 --no-pin -q \
        -o "$WORK/converted_replay.jsonl" >"$WORK/converted_replay.log" 2>&1 \
        || { printf '%-34s replay failed: %s\n' convert "$(tail -1 "$WORK/converted_replay.log")"; return; }
    python3 - "$WORK/converted.jsonl" "$WORK/converted_replay.jsonl" <<'PY'
import json, sys
conv = [json.loads(l) for l in open(sys.argv[1])]
recs = [json.loads(l) for l in open(sys.argv[2])]
same = sum(1 for r in recs if r.get("prompt_tokens") == conv[r["index"]]["input_length"])
print(f"{'convert-chat':<34} server prompt_tokens == converted input_length: {same}/{len(conv)} "
      f"({len(recs)} records)")
PY
}

make_model
RS="${REQUEST_SIM:-}"
if [[ -z "$RS" ]]; then
    (cd "$ROOT" && nice -n "$NICE" cargo build --release -p request-sim --bin request-sim >&2)
    RS="$ROOT/target/release/request-sim"
fi
TRACE="${TRACE:-/work/shared/traces/mooncake_conversation_trace.jsonl}"
[[ -f "$TRACE" ]] || { log "no trace at $TRACE (set TRACE=...)"; exit 1; }
WORK="$CACHE/run"
mkdir -p "$WORK"
shrink_trace "$TRACE" "$WORK/trace.jsonl"
start_server
echo "llama-server $("$SERVER" --version 2>&1 | grep -m1 version || true); request-sim: $RS"
check chat-endpoint-only /v1/chat/completions
check completions-endpoint-only /v1/completions
check chat-tokenizer /v1/chat/completions --tokenizer "$TOKDIR"
check completions-tokenizer /v1/completions --tokenizer "$TOKDIR"
check chat-endpoint-only-nostream /v1/chat/completions --no-stream
check chat-tokenizer-nostream /v1/chat/completions --no-stream --tokenizer "$TOKDIR"
check completions-tokenizer-nostream /v1/completions --no-stream --tokenizer "$TOKDIR"
# The conversation APIs agents speak (llama-server serves both on its chat template).
for api in responses messages; do
    check "$api-endpoint-only" "/v1/$api" --api "$api"
    check "$api-tokenizer" "/v1/$api" --api "$api" --tokenizer "$TOKDIR"
    check "$api-endpoint-only-nostream" "/v1/$api" --api "$api" --no-stream
    check "$api-tokenizer-nostream" "/v1/$api" --api "$api" --no-stream --tokenizer "$TOKDIR"
done
# An agent corpus (issue 27: the Weka fixtures: main agents with subagents, joins and a
# background subagent), on the API coding agents speak and on chat.
AGENTS="$ROOT/request-sim/tests/data/agents"
CHECK_DATASET="$AGENTS" check agents-messages-tokenizer /v1/messages --api messages --tokenizer "$TOKDIR"
CHECK_DATASET="$AGENTS" check agents-messages-endpoint-only /v1/messages --api messages
CHECK_DATASET="$AGENTS" check agents-chat-endpoint-only /v1/chat/completions
check_convert
