#!/usr/bin/env bash
# Agent-session benchmark against llm-sim on loopback (issue 27): many concurrent agent
# conversations (a main agent with a joined subagent each) replayed from a generated Weka corpus.
#
#   scripts/bench-agents.sh
#
# Generates CONVS conversations (Weka / kv-cache-tester JSON, one file each): a main agent of
# MAIN_REQS requests THINK_S seconds apart and one subagent of SUB_REQS requests spawned after
# the main agent's first request and joined by its second; conversations start SESSION_RATE per
# second (`--session-rate`), so about CONVS agent sessions (plus their subagents) are in flight
# at the peak. Prints from the records:
#   release latency = sent - (predecessor's completion + client gap) over the requests
#     released after a single predecessor (no joins), from the records    (p50/p99/max, ms)
#   release drift of every gate-released request (sent - release, as the tool measured it,
#     joins included)                                                     (p50/p99/max, ms)
#   drift of the clock-released requests (conversation starts)            (p50/p99/max, ms)
#   the peak of conversations in flight, records vs scheduled, the client's CPU time and
#   memory, the machine steal time over the run (`run.client_cpu.machine_steal_s`), the load
#   average;
#   the client's CPU per request next to that of the same requests replayed open-loop (each
#   record's lengths at its send time, a generic trace, no gates) in the same run, and what
#   the release clock and the real-time raises did (`run.releases`, `run.realtime`).
#
# Bounded: each conversation is replayed once (the corpus is finite) and `timeout` caps the
# run. Loopback only.
#
# A population behind a session-affinity router instead (issue 27's `--users 8` measurement):
#   USERS=8 TIME_S=60 INSTANCES=4 ROUTER=session CONVS=40 MAIN_REQS=30 SUB_REQS=6 THINK_S=1 \
#     BLOCKS=8 scripts/bench-agents.sh
# replays with `--users USERS --time-in-secs TIME_S` through llm-sim's router (`--session-header
# x-session-id`), and also prints how the subagents spread over the instances and the server
# hit ratio against the trace-ideal for the routing the run got.
#
# Environment (defaults in brackets):
#   CONVS [1000]  SESSION_RATE [50]  MAIN_REQS [8]  SUB_REQS [4]  THINK_S [5]  OUTPUT [8]
#   BLOCKS [2] blocks of 16 tokens each request adds   USERS []  TIME_S []  INSTANCES [1]
#   ROUTER [] (llm-sim --router policy; needs INSTANCES > 1)
#   BIN_DIR [target/release]  NO_BUILD [0]  OUT [bench-results/agents-<UTC time>]
#   EXTRA_ARGS []  more flags for `request-sim replay`
# Needs: jq, awk, python3, GNU time (/usr/bin/time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CONVS="${CONVS:-1000}"
SESSION_RATE="${SESSION_RATE:-50}"
MAIN_REQS="${MAIN_REQS:-8}"
SUB_REQS="${SUB_REQS:-4}"
THINK_S="${THINK_S:-5}"
OUTPUT="${OUTPUT:-8}"
BLOCKS="${BLOCKS:-2}"
USERS="${USERS:-}"
TIME_S="${TIME_S:-}"
INSTANCES="${INSTANCES:-1}"
ROUTER="${ROUTER:-}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/agents-$(date -u +%Y%m%d-%H%M%S)}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
for tool in jq awk python3; do
    command -v "$tool" >/dev/null || { echo "bench-agents.sh: $tool not found" >&2; exit 1; }
done
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
RS="$BIN_DIR/request-sim"
SIM="$BIN_DIR/llm-sim"
[[ -x "$RS" && -x "$SIM" ]] || { echo "bench-agents.sh: no binaries in $BIN_DIR" >&2; exit 1; }
mkdir -p "$OUT/corpus"

# The corpus: each request adds 2 blocks of 16 tokens to its agent's prompt.
python3 - "$OUT/corpus" "$CONVS" "$MAIN_REQS" "$SUB_REQS" "$THINK_S" "$OUTPUT" "$BLOCKS" <<'PY'
import json, sys
out, convs, main_reqs, sub_reqs, think, output, blocks = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
def req(t, n, think_s):
    return {"t": t, "type": "s", "in": n * blocks * 16, "out": output,
            "hash_ids": list(range(1, blocks * n + 1)), "api_time": 0.05, "think_time": think_s}
for c in range(convs):
    sub_start = 0.05 + 0.5
    sub = [dict(req(k * think, k + 1, think if k else 0.0),
                hash_ids=list(range(100000, 100000 + blocks * (k + 1))))
           for k in range(sub_reqs)]
    sub_end = sub_start + (sub_reqs - 1) * think + 0.05
    entries = [req(0.0, 1, 0.0),
               {"t": sub_end, "type": "subagent", "agent_id": "sa1", "status": "completed",
                "duration_ms": (sub_end - sub_start) * 1000, "requests": sub}]
    t = sub_end + think
    for k in range(1, main_reqs):
        entries.append(req(t, k + 1, think))
        t += think + 0.05
    doc = {"id": f"c{c:05d}", "block_size": 16, "hash_id_scope": "local", "requests": entries}
    with open(f"{out}/c{c:05d}.json", "w") as f:
        json.dump(doc, f)
PY

SIM_LOG="$OUT/llm-sim.log"
SIM_ARGS=(--host 127.0.0.1 --port 0 --preset fast --block-size 16 --instances "$INSTANCES")
[[ -n "$ROUTER" ]] && SIM_ARGS+=(--router "$ROUTER")
"$SIM" "${SIM_ARGS[@]}" 2>"$SIM_LOG" &
SIM_PID=$!
cleanup() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap cleanup EXIT
BASE=""
for _ in $(seq 100); do
    if [[ -n "$ROUTER" ]]; then
        BASE="$(grep 'router' "$SIM_LOG" | grep -o 'http://127\.0\.0\.1:[0-9]*' | head -1 || true)"
    else
        BASE="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | head -1 | awk '{print $3}' || true)"
    fi
    [[ -n "$BASE" ]] && break
    sleep 0.1
done
[[ -n "$BASE" ]] || { echo "bench-agents.sh: llm-sim did not start" >&2; cat "$SIM_LOG" >&2; exit 1; }

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
LIMIT=$(awk -v n="$CONVS" -v r="$SESSION_RATE" -v m="$MAIN_REQS" -v s="$SUB_REQS" -v th="$THINK_S" \
    'BEGIN { printf "%d", n / r + (m + s) * (th + 0.2) + 30 }')
if [[ -n "$USERS" ]]; then
    POP=(--users "$USERS" --session-header x-session-id)
    [[ -n "$TIME_S" ]] && { POP+=(--time-in-secs "$TIME_S"); LIMIT="$TIME_S"; }
else
    POP=(--session-rate "$SESSION_RATE")
fi
# shellcheck disable=SC2086
/usr/bin/time -o "$OUT/client-time.txt" -f "%U %S %M" \
    timeout $((LIMIT + 60)) "$RS" replay --endpoint "$BASE" --dataset-path "$OUT/corpus" --quiet \
    "${POP[@]}" --seed 1 \
    -o "$OUT/records.jsonl" $EXTRA_ARGS >"$OUT/console.txt" 2>"$OUT/replay.log"

# The same requests open-loop: every record's prompt and output lengths at the time it was
# sent, as a generic trace (no sessions, no gates), replayed against the same server. Its CPU per
# request is the floor the agent replay's gates are compared with.
jq -c 'select(.sent_ms != null) | {timestamp: .sent_ms, input_length, output_length: ([.output_tokens // 1, 1] | max)}' \
    "$OUT/records.jsonl" | sort -t: -k2 -g > "$OUT/open-loop.jsonl"
# shellcheck disable=SC2086
/usr/bin/time -o "$OUT/open-time.txt" -f "%U %S %M" \
    timeout $((LIMIT + 60)) "$RS" replay --endpoint "$BASE" --dataset-path "$OUT/open-loop.jsonl" \
    --dataset generic --block-size 16 --quiet --seed 1 -o "$OUT/open-records.jsonl" $EXTRA_ARGS \
    >"$OUT/open-console.txt" 2>"$OUT/open-replay.log"

pct() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit }
    i50 = int(0.50 * NR); if (i50 < 1) i50 = 1; i99 = int(0.99 * NR + 0.999); if (i99 > NR) i99 = NR
    printf "n=%d p50 %.3f p99 %.3f max %.3f ms\n", NR, v[i50], v[i99], v[NR] }'; }
REC="$OUT/records.jsonl"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)') (the checkout); binaries: $BIN_DIR ($("$RS" --version 2>/dev/null || echo 'version unknown'))"
echo "load average before / after the run: $LOAD_BEFORE / $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a); cores: $(nproc)"
echo "corpus: $CONVS conversations x ($MAIN_REQS main + $SUB_REQS subagent requests), $SESSION_RATE starts/s, gaps ${THINK_S} s"
read -r CU CS CM < "$OUT/client-time.txt" || true
NREC=$(wc -l < "$OUT/records.jsonl")
echo "client CPU: user ${CU:-?} s, system ${CS:-?} s, max RSS $(( ${CM:-0} / 1024 )) MB; $(awk -v u="${CU:-0}" -v s="${CS:-0}" -v n="$NREC" 'BEGIN { printf "%.3f", (u + s) * 1000 / (n > 0 ? n : 1) }') CPU-ms per request (summary: $(jq '.run.client_cpu.ms_per_request' "$OUT/records.jsonl.summary.json")); machine steal time during the run: $(jq '.run.client_cpu.machine_steal_s' "$OUT/records.jsonl.summary.json") s (a VM's stalls: tails and CPU rise with it)"
read -r OU OS _ < "$OUT/open-time.txt" || true
NOPEN=$(wc -l < "$OUT/open-records.jsonl")
echo "the same $NOPEN requests open-loop: user ${OU:-?} s, system ${OS:-?} s; $(awk -v u="${OU:-0}" -v s="${OS:-0}" -v n="$NOPEN" 'BEGIN { printf "%.3f", (u + s) * 1000 / (n > 0 ? n : 1) }') CPU-ms per request, drift p99 $(jq '.drift.p99_ms' "$OUT/open-records.jsonl.summary.json") ms"
echo "release clock: $(jq -c '.run.releases' "$OUT/records.jsonl.summary.json"); realtime: $(jq -c '.run.realtime | {policy, io_raises, io_raised_s, keep_awake_threads, keep_awake_raises, keep_awake_s}' "$OUT/records.jsonl.summary.json")"
echo "records: $(wc -l < "$REC") (scheduled: $(jq '.run.scheduled' "$REC.summary.json")), statuses: $(jq -c '.status' "$REC.summary.json")"
echo -n "conversations in flight, peak: "
jq -r 'select(.conversation != null and .sent_ms != null) | [.conversation, .sent_ms, (.sent_ms + (.done_ms // .e2e_ms // 0))] | @tsv' "$REC" \
    | awk -F'\t' '{ if (!($1 in s) || $2 < s[$1]) s[$1] = $2; if (!($1 in e) || $3 > e[$1]) e[$1] = $3 }
        END { for (c in s) { print s[c], 1; print e[c], -1 } }' \
    | sort -g | awk '{ n += $2; if (n > m) m = n } END { print m + 0 }'
echo -n "release latency (sent - predecessor done - gap, no joins): "
jq -s 'INDEX(.index|tostring) as $by
    | .[] | select(.parent_index != null and .sent_ms != null and .joins == null and .think_ms != null)
    | $by[.parent_index|tostring] as $p
    | select($p.sent_ms != null and $p.done_ms != null)
    | (.sent_ms - ($p.sent_ms + $p.done_ms) - .think_ms)' "$REC" | pct
echo -n "release drift, gate-released (joins included): "
jq 'select(.think_ms != null and .drift_ms != null) | .drift_ms' "$REC" | pct
echo -n "drift, clock-released (conversation starts): "
jq 'select(.think_ms == null and .drift_ms != null) | .drift_ms' "$REC" | pct
SUM="$REC.summary.json"
echo "agents: $(jq -c '.agents | {conversations, conversations_completed, subagents_spawned, subagents_joined, wall_time_p50_s, trace_wall_time_p50_s, requests_not_sent}' "$SUM")"
echo "prefix hit ratio: server $(jq '.agents.server_hit_ratio' "$SUM"), trace-ideal (one cache) $(jq '.agents.ideal_hit_ratio' "$SUM"), trace-ideal for the routing the run got $(jq '.agents.routed_ideal_hit_ratio' "$SUM") over $(jq '.agents.instances_served' "$SUM") instance(s)"
if [[ "$INSTANCES" -gt 1 ]]; then
    echo "requests per instance, main agents / subagents:"
    jq -r 'select(.served_by != null) | [(.served_by.pod // "?"), (if .agent == "main" then "main" else "sub" end)] | @tsv' "$REC" \
        | sort | uniq -c | awk '{ printf "  %s %s: %d\n", $2, $3, $1 }'
    echo -n "subagents served on a different instance than their parent's request: "
    jq -s 'INDEX(.index|tostring) as $by | [ .[] | select(.agent != null and .agent != "main" and .turn == 1 and .parent_index != null and .served_by != null)
        | ($by[.parent_index|tostring].served_by.pod != .served_by.pod) ] | "\(map(select(.)) | length) of \(length)"' -r "$REC"
fi
echo "results in $OUT"
