#!/usr/bin/env bash
# Record a running vLLM's answers as test fixtures (issue #38: llm-sim is held to real vLLM by
# tools/llm-sim/tests/it/parity.rs, which replays the same requests against llm-sim and compares
# the shapes).
#
#   scripts/vllm-record.sh [BASE_URL] [OUT_DIR]
#
#   BASE_URL  the vLLM server (or $VLLM_URL; default http://127.0.0.1:18600)
#   OUT_DIR   where to write (default request-sim/tests/data/vllm-0.32/; files already there that
#             this script does not write, such as the hand-recorded chat_stream_reasoning.sse,
#             are left alone)
#
# Environment:
#   VLLM_PY      python with pyzmq and msgspec (default .cache/vllm/venv/bin/python)
#   KV_ENDPOINT  record KV events too: the endpoint the SUBSCRIBER uses, e.g. tcp://127.0.0.1:5557
#   KV_MODE      `connect` (vLLM was started with tcp://*:PORT and binds; we connect) or `bind`
#                (vLLM was started with tcp://HOST:PORT and connects; we bind). Default connect.
#   ONLY_KV=1    send only a few small requests and record only the KV events (for a shared
#                server: no cache reset, no other files written)
#   RESET=0      do not POST /reset_prefix_cache (needs VLLM_SERVER_DEV_MODE=1 on the server)
#
# What it writes (each request's body, path and HTTP status are listed in requests.jsonl, which
# the parity test replays):
#   chat.json chat_stream.sse completions.json completions_stream.sse responses.json
#   responses_stream_usage.sse messages.json messages_stream_usage.sse  (prompt-cache hits:
#   each is sent after an unrecorded warm-up with the same prompt)
#   error_{chat,responses,messages}_context_400.json  (a prompt over max-model-len)
#   error_{chat,responses,messages}_unknown_model_404.json
#   metrics.txt             GET /metrics after the requests, the `vllm:` families only (no
#                           `_created` series)
#   kv_events_vllm_binds.hex / kv_events_vllm_connects.hex  one ZeroMQ multipart message a line,
#                           its frames (topic, sequence, msgpack payload) in hex, space-separated
#
# A server for everything, KV events in the connect form (the subscriber binds):
#   cd .cache/vllm && VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 venv/bin/vllm serve \
#     qwen3-tiny-random --served-model-name qwen3 --port 18600 --block-size 32 \
#     --enable-prefix-caching --enable-prompt-tokens-details --max-model-len 4096 \
#     --kv-events-config '{"enable_kv_cache_events":true,"publisher":"zmq",
#                          "endpoint":"tcp://127.0.0.1:5660","topic":"kv"}'
#   KV_MODE=bind KV_ENDPOINT=tcp://127.0.0.1:5660 scripts/vllm-record.sh http://127.0.0.1:18600
# The bind form (vLLM started with "endpoint":"tcp://*:5557"):
#   ONLY_KV=1 KV_MODE=connect KV_ENDPOINT=tcp://127.0.0.1:5557 scripts/vllm-record.sh URL
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
URL="${1:-${VLLM_URL:-http://127.0.0.1:18600}}"
OUT="${2:-$ROOT/request-sim/tests/data/vllm-0.32}"
PY="${VLLM_PY:-$ROOT/.cache/vllm/venv/bin/python}"
mkdir -p "$OUT"

exec "$PY" - "$URL" "$OUT" <<'PYEOF'
import json, os, re, sys, threading, time, urllib.error, urllib.request

url, out = sys.argv[1].rstrip("/"), sys.argv[2]
kv_endpoint = os.environ.get("KV_ENDPOINT")
kv_mode = os.environ.get("KV_MODE", "connect")
only_kv = os.environ.get("ONLY_KV") == "1"
reset = os.environ.get("RESET", "1") != "0"


def log(*a):
    print("vllm-record.sh:", *a, file=sys.stderr)


def http(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


models = json.loads(http("GET", "/v1/models")[1])["data"]
model = models[0]["id"]
max_len = models[0].get("max_model_len") or 4096
log(f"{url}: model {model}, max_model_len {max_len}")

# KV events: a SUB socket on a thread, every multipart message kept.
frames, stop = [], threading.Event()
if kv_endpoint:
    import zmq
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    (sub.bind if kv_mode == "bind" else sub.connect)(kv_endpoint)

    def listen():
        while not stop.is_set():
            if sub.poll(100):
                frames.append(sub.recv_multipart())

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    time.sleep(1.5)  # slow joiner: let the PUB side see the subscription

# ~150 tokens with Qwen3's tokenizer: several whole blocks of 32, so a repeat hits the cache.
PROMPT = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(12))
SMALL = {"max_tokens": 4, "ignore_eos": True}
USAGE = {"stream_options": {"include_usage": True}}
chat = {"model": model, "messages": [{"role": "user", "content": PROMPT}], **SMALL}
cmpl = {"model": model, "prompt": PROMPT, **SMALL}
resp = {"model": model, "input": PROMPT, "max_output_tokens": 4, "ignore_eos": True}
msgs = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4,
        "ignore_eos": True}
over = " ".join(["hello"] * (max_len + 10))

# (file, path, body, warm up first)
plan = [
    ("chat.json", "/v1/chat/completions", chat, True),
    ("chat_stream.sse", "/v1/chat/completions", {**chat, "stream": True, **USAGE}, False),
    ("completions.json", "/v1/completions", cmpl, True),
    ("completions_stream.sse", "/v1/completions", {**cmpl, "stream": True, **USAGE}, False),
    ("responses.json", "/v1/responses", resp, True),
    ("responses_stream_usage.sse", "/v1/responses", {**resp, "stream": True}, False),
    ("messages.json", "/v1/messages", msgs, True),
    ("messages_stream_usage.sse", "/v1/messages", {**msgs, "stream": True}, False),
    ("error_chat_context_400.json", "/v1/chat/completions",
     {**chat, "messages": [{"role": "user", "content": over}]}, False),
    ("error_chat_unknown_model_404.json", "/v1/chat/completions", {**chat, "model": "nope"}, False),
    ("error_responses_context_400.json", "/v1/responses", {**resp, "input": over}, False),
    ("error_responses_unknown_model_404.json", "/v1/responses", {**resp, "model": "nope"}, False),
    ("error_messages_context_400.json", "/v1/messages",
     {**msgs, "messages": [{"role": "user", "content": over}]}, False),
    ("error_messages_unknown_model_404.json", "/v1/messages", {**msgs, "model": "nope"}, False),
]
if only_kv:
    plan = [("", "/v1/completions", {**cmpl, "max_tokens": 2}, True)]

manifest = []
for name, path, body, warm in plan:
    if warm:
        http("POST", path, body)
    status, data = http("POST", path, body)
    log(f"{path} -> {status} ({len(data)} bytes){' ' + name if name else ''}")
    if not name:
        continue
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    # The 400's prompt is long: keep the request small in the manifest (the test rebuilds it).
    shown = body
    if "context_400" in name and "messages" in body:
        shown = {**body, "messages": [{"role": "user", "content": "hello * %d" % (max_len + 10)}]}
    elif "context_400" in name:
        shown = {**body, "input": "hello * %d" % (max_len + 10)}
    manifest.append({"file": name, "method": "POST", "path": path, "status": status,
                     "stream": bool(body.get("stream")), "body": shown})

if not only_kv:
    with open(os.path.join(out, "requests.jsonl"), "w") as f:
        for m in manifest:
            f.write(json.dumps(m) + "\n")
    page = http("GET", "/metrics")[1].decode()
    # The `vllm:` families only, without prometheus_client's `_created` series.
    keep = [l for l in page.splitlines()
            if "vllm:" in l and not re.search(r"^(# (HELP|TYPE) )?vllm:\w+_created[ {]", l)]
    with open(os.path.join(out, "metrics.txt"), "w") as f:
        f.write("\n".join(keep) + "\n")
    log(f"metrics.txt: {len(keep)} of {len(page.splitlines())} lines (vllm: only)")

if kv_endpoint:
    if reset and not only_kv:
        status, _ = http("POST", "/reset_prefix_cache")
        log(f"/reset_prefix_cache -> {status}")
        # AllBlocksCleared goes out with the next engine step.
        http("POST", "/v1/completions", {**cmpl, "prompt": "after reset", "max_tokens": 1})
    time.sleep(2)
    stop.set()
    t.join()
    name = "kv_events_vllm_connects.hex" if kv_mode == "bind" else "kv_events_vllm_binds.hex"
    # Trim: the first few messages, and every one that holds something other than BlockStored.
    keep = [m for i, m in enumerate(frames)
            if i < 6 or b"BlockStored" not in m[-1] or b"AllBlocksCleared" in m[-1]]
    with open(os.path.join(out, name), "w") as f:
        for m in keep:
            f.write(" ".join(x.hex() for x in m) + "\n")
    log(f"{name}: {len(keep)} of {len(frames)} messages")
PYEOF
