#!/usr/bin/env bash
# A real cluster on this machine: K real vLLM 0.32 (the CPU build, the tiny Qwen3 of
# scripts/vllm-install.sh) behind a real router, the Shepherd Model Gateway (PyPI `smg`), and
# request-sim's checks against it, each a real replay with a row of numbers (docs/cluster.md).
#
#   scripts/cluster.sh                      # install (once), start, run every check, print rows
#   scripts/cluster.sh up                   # only start the cluster (KEEP=1 implied); `down` stops it
#   scripts/cluster.sh policies affinity kill whatif   # some checks (REUSE=1: a cluster already up)
#
# Checks:
#  - policies: for each of POLICIES (cache_aware round_robin by default) smg restarted with that
#    policy, the instances' caches reset, a multi-turn workload (scripts/sessions-trace.py:
#    sessions with a shared system prompt, each turn adding to its history) replayed through the
#    router given only the router's URL: records = scheduled, exact, client cached tokens against
#    the sum of the instances' `prefix_cache_hits_total` deltas, each request's instance from the
#    instances' KV events (--kv-events) against each instance's own `request_success_total`
#    delta, the server hit ratio next to the routed ideal and the one-cache ideal;
#  - affinity: smg `consistent_hashing`, sessions sent in X-SMG-Routing-Key (--session-header
#    smg): every session on one instance (from the records);
#  - kill: one vLLM killed mid-run (SIGKILL) and started again: records = scheduled, errors
#    classified, the instance's outage in the per-instance table, the router's failover;
#  - whatif: llm-sim's built-in router with each policy and K instances on the same workload,
#    next to the real cluster's rows; whatif32: the what-if at 32 instances (SESSIONS32).
# Not run in CI (vLLM's venv is ~6 GB). Environment: K (3), POLICIES, SESSIONS (24), TURNS (6),
# BASE_PORT (18600: the router; instances BASE_PORT+1..K; KV events on KV_BASE (5600)+1..K;
# the router's metrics on ROUTER_METRICS_PORT, 29000), SYSTEM_BLOCKS (4: the shared system
# prompt of the workload, in 64-token blocks), REQUEST_SIM, LLM_SIM (default target/release/...),
# OUT (.cache/cluster/runs/<time>), KEEP=1 (leave the cluster running), VLLM_CPU_KVCACHE_SPACE (1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VLLM_CACHE:-$ROOT/.cache/vllm}"
VENV="$CACHE/venv"
MODEL="$CACHE/qwen3-tiny-random"
SMG_VENV="$ROOT/.cache/smg/venv"
K="${K:-3}"
POLICIES="${POLICIES:-cache_aware round_robin}"
SESSIONS="${SESSIONS:-24}"
TURNS="${TURNS:-6}"
BASE_PORT="${BASE_PORT:-18600}"
KV_BASE="${KV_BASE:-5600}"
ROUTER="http://127.0.0.1:$BASE_PORT"
# smg's default metrics port: request-sim looks there for the router's own page.
ROUTER_METRICS_PORT="${ROUTER_METRICS_PORT:-29000}"
RS="${REQUEST_SIM:-$ROOT/target/release/request-sim}"
LS="${LLM_SIM:-$(dirname "$RS")/llm-sim}"
OUT="${OUT:-$ROOT/.cache/cluster/runs/$(date -u +%Y%m%dT%H%M%S)}"
STATE="$ROOT/.cache/cluster/state"
TOKDIR="$ROOT/.cache/tokenizers/qwen3"
CHECKS=("$@")
[[ ${#CHECKS[@]} -gt 0 ]] || CHECKS=(policies affinity kill whatif whatif32)

log() { echo "cluster.sh: $(date +%T) $*" >&2; }
want() { local c; for c in "${CHECKS[@]}"; do [[ "$c" == "$1" ]] && return 0; done; return 1; }
inst_url() { echo "http://127.0.0.1:$((BASE_PORT + $1))"; }

mkdir -p "$OUT" "$STATE"

install() {
    bash "$ROOT/scripts/vllm-install.sh"
    if [[ ! -x "$SMG_VENV/bin/smg" ]]; then
        log "installing smg (PyPI) into $SMG_VENV"
        python3 -m venv "$SMG_VENV"
        "$SMG_VENV/bin/pip" install -q "smg==${SMG_VERSION:-1.13.0}" >&2
    fi
    if [[ ! -x "$RS" || ! -x "$LS" ]]; then
        log "building request-sim and llm-sim (release, $ROOT/target/release)"
        (cd "$ROOT" && cargo build --release -q -p request-sim -p llm-sim)
        [[ -x "$RS" ]] || RS="$ROOT/target/release/request-sim"
        [[ -x "$LS" ]] || LS="$ROOT/target/release/llm-sim"
    fi
}

# One vLLM instance i (1..K): its port, its KV events published on tcp://*:KV_BASE+i.
start_instance() {
    local i="$1" port=$((BASE_PORT + $1)) kv=$((KV_BASE + $1))
    (
        cd "$CACHE"
        VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" \
            exec "$VENV/bin/vllm" serve "$MODEL" --served-model-name qwen3 \
            --host 127.0.0.1 --port "$port" --block-size 32 --enable-prefix-caching \
            --enable-prompt-tokens-details --max-model-len 8192 \
            --kv-events-config "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:$kv\",\"topic\":\"kv\"}"
    ) >"$STATE/vllm-$i.log" 2>&1 &
    echo $! >"$STATE/vllm-$i.pid"
}
wait_instance() {
    local i="$1" t0=$SECONDS
    until curl -sf "$(inst_url "$i")/v1/models" >/dev/null; do
        kill -0 "$(cat "$STATE/vllm-$i.pid")" 2>/dev/null || { log "vllm $i exited: see $STATE/vllm-$i.log"; tail -20 "$STATE/vllm-$i.log" >&2; exit 1; }
        ((SECONDS - t0 < 900)) || { log "vllm $i not ready in 900 s"; exit 1; }
        sleep 2
    done
}
stop_instance() {
    local i="$1" pid
    pid="$(cat "$STATE/vllm-$i.pid" 2>/dev/null || true)"
    [[ -n "$pid" ]] || return 0
    kill "$@" "$pid" 2>/dev/null || true
    # vLLM's engine core is a child process: stop what serves the port.
    pkill -f -- "--port $((BASE_PORT + i)) " 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$STATE/vllm-$i.pid"
}
# The router with a policy (and smg flags); its own metrics on ROUTER_METRICS_PORT.
start_router() {
    local policy="$1"
    shift
    stop_router
    local workers=()
    for i in $(seq 1 "$K"); do workers+=("$(inst_url "$i")"); done
    "$SMG_VENV/bin/smg" launch --host 127.0.0.1 --port "$BASE_PORT" --worker-urls "${workers[@]}" \
        --policy "$policy" --prometheus-host 127.0.0.1 --prometheus-port "$ROUTER_METRICS_PORT" \
        --log-level warn "$@" >"$STATE/smg-$policy.log" 2>&1 &
    echo $! >"$STATE/smg.pid"
    local t0=$SECONDS
    until curl -sf "$ROUTER/v1/models" >/dev/null && curl -sf "$ROUTER/workers" | grep -q url \
        && curl -sf "http://127.0.0.1:$ROUTER_METRICS_PORT/metrics" >/dev/null; do
        kill -0 "$(cat "$STATE/smg.pid")" 2>/dev/null || { log "smg exited: see $STATE/smg-$policy.log"; tail -20 "$STATE/smg-$policy.log" >&2; exit 1; }
        ((SECONDS - t0 < 120)) || { log "smg not ready in 120 s"; exit 1; }
        sleep 1
    done
    log "smg $policy ready on $ROUTER (metrics :$ROUTER_METRICS_PORT) in $((SECONDS - t0)) s"
}
stop_router() {
    local pid
    pid="$(cat "$STATE/smg.pid" 2>/dev/null || true)"
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    # Gone, and its ports free, before another starts (smg drains on SIGTERM).
    local t0=$SECONDS
    while pgrep -f "smg::router|smg launch" >/dev/null || curl -s -o /dev/null "$ROUTER/workers"; do
        if ((SECONDS - t0 > 10)); then
            pkill -9 -f "smg::router|smg launch" 2>/dev/null || true
        fi
        ((SECONDS - t0 < 30)) || { log "smg did not stop"; exit 1; }
        sleep 0.5
    done
    rm -f "$STATE/smg.pid"
}
up() {
    local t0=$SECONDS
    for i in $(seq 1 "$K"); do
        if curl -sf "$(inst_url "$i")/v1/models" >/dev/null; then continue; fi
        log "starting vllm $i on $(inst_url "$i") (KV events tcp://*:$((KV_BASE + i)))"
        start_instance "$i"
    done
    for i in $(seq 1 "$K"); do wait_instance "$i"; done
    log "$K vLLM instances ready in $((SECONDS - t0)) s"
}
down() {
    stop_router
    for i in $(seq 1 "$K"); do stop_instance "$i"; done
}

case "${CHECKS[0]}" in
    up)
        install
        up
        start_router cache_aware
        exit 0
        ;;
    down)
        down
        exit 0
        ;;
esac

install
up
trap '[[ "${KEEP:-0}" == 1 ]] || down' EXIT

TRACE="$OUT/sessions.jsonl"
python3 "$ROOT/scripts/sessions-trace.py" "$TRACE" --sessions "$SESSIONS" --turns "$TURNS" --block 64 \
    --system "${SYSTEM_BLOCKS:-4}"
TOK=(--tokenizer "$TOKDIR/tokenizer.json" --tokenizer-config "$TOKDIR/tokenizer_config.json")
KV_ARGS=()
for i in $(seq 1 "$K"); do KV_ARGS+=("$(inst_url "$i")=tcp://127.0.0.1:$((KV_BASE + i))"); done
KV_LIST="$(IFS=,; echo "${KV_ARGS[*]}")"
COMMON=(--block-size 64 --stream "${TOK[@]}" --timing closed
    --metrics-interval 500ms --quiet)

# Each instance's counters (one line per instance: hits success) and the router's per-worker
# successes (smg_worker_cb_outcomes_total{outcome="success"}).
counters() {
    for i in $(seq 1 "$K"); do
        curl -sf "$(inst_url "$i")/metrics" | awk -v i="$i" '
            /^vllm:prefix_cache_hits_total/ {h += $NF}
            /^vllm:request_success_total/ {s += $NF}
            END {printf "%d %d %d\n", i, h, s}' || echo "$i -1 -1"
    done
}
router_counts() {
    curl -sf "http://127.0.0.1:$ROUTER_METRICS_PORT/metrics" | python3 -c '
import re, sys
c = {}
for l in sys.stdin:
    m = re.match(r"smg_worker_cb_outcomes_total\{(.*)\} (\S+)", l)
    if m:
        w = re.search(r"worker=\"([^\"]+)\"", m.group(1)).group(1)
        o = re.search(r"outcome=\"([^\"]+)\"", m.group(1)).group(1)
        c[(w, o)] = c.get((w, o), 0) + float(m.group(2))
print(" ".join(f"{w}|{o}={int(v)}" for (w, o), v in sorted(c.items())))' || true
}
reset_caches() { for i in $(seq 1 "$K"); do curl -sf -X POST "$(inst_url "$i")/reset_prefix_cache" >/dev/null || true; done; }

ROWS="$OUT/rows.tsv"
python3 "$ROOT/scripts/cluster-row.py" --header >"$ROWS"
# replay NAME ARGS...: a replay through the router (its URL only) with counters around it and
# a row of numbers (scripts/cluster-row.py).
replay() {
    local name="$1"
    shift
    local dir="$OUT/$name" rc=0
    mkdir -p "$dir"
    reset_caches
    counters >"$dir/before.txt"
    router_counts >"$dir/router-before.txt"
    local t0=$SECONDS
    "$RS" replay --endpoint "$ROUTER" --dataset-path "${RUN_TRACE:-$TRACE}" "${COMMON[@]}" \
        --kv-events "$KV_LIST" "$@" \
        --output-path "$dir/records.jsonl" --result-dir "$dir" >"$dir/console.txt" \
        2>"$dir/stderr.txt" || rc=$?
    echo "$((SECONDS - t0))" >"$dir/seconds.txt"
    counters >"$dir/after.txt"
    router_counts >"$dir/router-after.txt"
    python3 "$ROOT/scripts/cluster-row.py" "$dir" "$name" "$rc" >>"$ROWS"
    tail -n1 "$ROWS" >&2
}

if want policies; then
    for p in $POLICIES; do
        start_router "$p"
        replay "smg-$p"
    done
fi

if want affinity; then
    start_router consistent_hashing
    replay smg-consistent_hashing-affinity --session-header smg
fi

if want kill; then
    # Round-robin, so the victim has requests in flight when it dies; a longer trace, so the
    # victim is back (vLLM restarts in ~1.5 min here) before the run ends.
    start_router round_robin
    victim="$K"
    python3 "$ROOT/scripts/sessions-trace.py" "$OUT/sessions-long.jsonl" --sessions "$SESSIONS" \
        --turns 10 --block 64 --spread 60 --seed 2
    (
        sleep "${KILL_AT:-25}"
        log "killing vllm $victim (SIGKILL) mid-run"
        stop_instance "$victim" -9
        sleep "${DOWN_FOR:-5}"
        log "starting vllm $victim again"
        start_instance "$victim"
    ) &
    killer=$!
    RUN_TRACE="$OUT/sessions-long.jsonl" replay smg-round_robin-kill
    wait "$killer" || true
    wait_instance "$victim"
fi

# llm-sim's built-in router, N instances, POLICY, on a trace: a row named NAME.
whatif_run() {
    local name="$1" n="$2" policy="$3" trace="$4" dir="$OUT/$1"
    shift 4
    mkdir -p "$dir"
    "$LS" --instances "$n" --router "$policy" --port $((BASE_PORT + 100)) --served-model-name qwen3 \
        --tokenizer "$TOKDIR/tokenizer.json" --tokenizer-config "$TOKDIR/tokenizer_config.json" \
        --block-size 32 --max-model-len 8192 >"$dir/llm-sim.log" 2>&1 &
    # The instances take ports BASE_PORT+100.. and the router the next one.
    local lpid=$! t0=$SECONDS front="http://127.0.0.1:$((BASE_PORT + 100 + n))"
    until curl -sf "$front/health" >/dev/null; do
        kill -0 "$lpid" 2>/dev/null || { log "llm-sim exited: see $dir/llm-sim.log"; tail -5 "$dir/llm-sim.log" >&2; exit 1; }
        ((SECONDS - t0 < 60)) || { log "llm-sim not ready in 60 s"; exit 1; }
        sleep 0.5
    done
    t0=$SECONDS
    "$RS" replay --endpoint "$front" --dataset-path "$trace" \
        "${COMMON[@]}" "$@" --output-path "$dir/records.jsonl" --result-dir "$dir" \
        >"$dir/console.txt" 2>"$dir/stderr.txt" || true
    echo "$((SECONDS - t0))" >"$dir/seconds.txt"
    kill "$lpid"
    wait "$lpid" 2>/dev/null || true
    python3 "$ROOT/scripts/cluster-row.py" "$dir" "$name" 0 >>"$ROWS"
    tail -n1 "$ROWS" >&2
}

if want whatif; then
    stop_router
    for p in $POLICIES; do whatif_run "llm-sim-$p" "$K" "$p" "$TRACE"; done
    whatif_run llm-sim-consistent_hashing-affinity "$K" consistent_hashing "$TRACE" \
        --session-header smg
fi

# The what-if at 32 instances: SESSIONS32 sessions (320), each policy.
if want whatif32; then
    python3 "$ROOT/scripts/sessions-trace.py" "$OUT/sessions-32.jsonl" --sessions "${SESSIONS32:-320}" \
        --turns "$TURNS" --block 64 --spread 60 --seed 3
    for p in $POLICIES; do whatif_run "llm-sim-32-$p" 32 "$p" "$OUT/sessions-32.jsonl"; done
    whatif_run llm-sim-32-consistent_hashing-affinity 32 consistent_hashing \
        "$OUT/sessions-32.jsonl" --session-header smg
fi

printf '\n%s\n' "rows ($OUT/rows.tsv):"
column -t -s $'\t' "$ROWS" 2>/dev/null || cat "$ROWS"
