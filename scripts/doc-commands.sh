#!/usr/bin/env bash
# Runs the commands that README.md and docs/ show, as a user would, against local stand-ins,
# and checks that every --flag the pages name exists.
#
#   scripts/doc-commands.sh            # builds release binaries first (in $CARGO_TARGET_DIR/release,
#                                      # else target/release)
#   NO_BUILD=1 scripts/doc-commands.sh # uses those binaries as they are
#   BIN=path/to/release scripts/doc-commands.sh   # other binaries (a debug build works too)
#
# Each command keeps the documented form; only what cannot be on this machine is replaced:
# the server (`http://127.0.0.1:8000`, `HOST:PORT`) is an llm-sim this script starts on a free
# loopback port (with the Qwen3 tokenizer of scripts/fetch-tokenizer.sh when a command names a
# tokenizer), the trace is a 60-request conversation trace this script writes (same shape as
# the Mooncake one), paths go to a temporary directory, and request counts are cut to tens so
# the whole script takes a few minutes. A line per command: the page and line it comes from,
# ok or FAIL with the exit status and the first error line. The exit status is the number of
# failures (0: every documented command works).
#
# Also: `convert` on a log made by scripts/make_conversation_log.py from a few inline dialogs
# (and on the LiteLLM and OpenTelemetry fixtures of request-sim/tests/data/logs), agent corpora
# (request-sim/tests/data/agents and traces/agent: replay, analyze, `sweep --users`), `--repeat`
# with `compare` of two repeat sets, `compare --fail-if-worse` both passing (exit 0) and
# tripping (exit 7: the same trace against a slower llm-sim), and `--metrics-port` (the page
# scraped while the run goes).
#
# Not run: `scripts/test.sh` (that is CI), the benchmarks (scripts/bench*.sh, cargo bench),
# scripts/fuzz.sh (needs cargo-fuzz), scripts/llama-server.sh (a 10-minute build), the
# scripts that need the shared Mooncake trace (scripts/sweep-capacity.sh) and the Rust snippets
# of docs/llm-sim.md, docs/prompts.md and docs/traces.md (library code, not commands); their
# pages say how to run them.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
RELEASE=${CARGO_TARGET_DIR:-$ROOT/target}/release
BIN=${BIN:-$RELEASE}
if [[ -z "${NO_BUILD:-}" && "$BIN" == "$RELEASE" ]]; then
  cargo build --release -p request-sim -p llm-sim --bins --examples >/dev/null || exit 100
fi
RS=$BIN/request-sim
for b in request-sim llm-sim client trace_replay aiperf; do
  [[ -x $BIN/$b ]] || { echo "missing $BIN/$b (build first)"; exit 100; }
done
Q=${REQUEST_SIM_QWEN3_DIR:-$ROOT/.cache/tokenizers/qwen3}
if [[ ! -f $Q/tokenizer.json ]]; then
  scripts/fetch-tokenizer.sh >/dev/null 2>&1 || true
fi
HAVE_Q=0; [[ -f $Q/tokenizer.json ]] && HAVE_Q=1

T=$(mktemp -d /tmp/doc-commands.XXXXXX)
PIDS=()
# The stand-in servers stopped (and waited for, so none writes into $T as it goes), then the
# scratch directory removed; on any exit, Ctrl-C included.
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the stand-ins ---------------------------------------------------------------------------
# A conversation trace: 20 sessions of 3 turns, each turn's hash ids extending the last one.
python3 - "$T/trace.jsonl" <<'EOF'
import json, sys
rows = []
for s in range(20):
    ids = [1000 * s + k for k in range(3)]
    for turn in range(3):
        rows.append({"timestamp": s * 300 + turn * 2000, "input_length": 512 * len(ids) - 100,
                     "output_length": 24, "hash_ids": list(ids)})
        ids += [1000 * s + 100 + 10 * turn + k for k in range(2)]
rows.sort(key=lambda r: r["timestamp"])
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
EOF
TRACE=$T/trace.jsonl

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start_sim VAR [llm-sim flags]: an llm-sim on a free port; its base URL in $VAR.
start_sim() {
  local var=$1; shift
  local port; port=$(free_port)
  "$BIN/llm-sim" --host 127.0.0.1 --port "$port" "$@" >"$T/sim-$port.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/models" && break
    sleep 0.1
  done
  printf -v "$var" 'http://127.0.0.1:%s' "$port"
}
start_sim SIM
SIMQ=
if (( HAVE_Q )); then
  # Served under the model's path, as `vllm serve /path/to/model` names it (trace_replay's --model).
  start_sim SIMQ --tokenizer "$Q/tokenizer.json" --tokenizer-config "$Q/tokenizer_config.json" \
    --model-name "$Q"
fi

FAILS=0
RUNS=0
# run PAGE:LINE EXPECTED_STATUS command...: runs it (90 s at most) in the temporary directory.
# PAGE:LINE is where the command (or the row of the README's table) is; a letter after the
# line tells several commands from one line apart.
run() {
  local where=$1 want=$2; shift 2
  local log=$T/cmd-$RUNS.log
  RUNS=$((RUNS + 1))
  (cd "$T" && timeout 90 "$@") >"$log" 2>&1
  local rc=$?
  if [[ $rc == "$want" ]]; then
    printf '%-28s ok    %s\n' "$where" "$*" | cut -c1-160
  else
    FAILS=$((FAILS + 1))
    printf '%-28s FAIL  rc=%s (want %s)  %s\n' "$where" "$rc" "$want" "$*" | cut -c1-200
    grep -m2 -iE 'error|refus|panic|cannot|unknown|unexpected' "$log" | sed 's/^/      /' | cut -c1-200
  fi
}
# needs_q PAGE:LINE: false (and says so) when the Qwen3 tokenizer is not here.
needs_q() {
  (( HAVE_Q )) && return 0
  printf '%-28s skip  (no Qwen3 tokenizer: scripts/fetch-tokenizer.sh)\n' "$1"
  return 1
}

echo "== documented commands (binaries: $BIN, scratch: $T)"
# README
run README.md:10 0 "$RS" replay
run README.md:117 0 "$RS" replay --help
if needs_q README.md:29; then
  run README.md:29 0 "$RS" replay --endpoint "$SIMQ/v1/chat/completions" \
    --tokenizer "$Q/tokenizer.json" --tokenizer-config "$Q/tokenizer_config.json" \
    --dataset-path "$TRACE" --scale-factor 2 --max-requests 30 \
    --goodput ttft:2000 tpot:50 --output-path results/run1.jsonl --result-dir results/run1
  run README.md:129 0 "$BIN/client" --tokenizer "$Q/tokenizer.json" \
    --tokenizer-config "$Q/tokenizer_config.json" \
    --endpoint "$SIMQ/v1/chat/completions" --api openai --dataset mooncake \
    --dataset-path "$TRACE" --scale-factor 1.5 --num-producer 2 --stream --max-requests 30
  run README.md:143 0 "$BIN/trace_replay" --model "$Q" --backend vllm \
    --trace-path "$TRACE" --trace-mode trace --host 127.0.0.1 --port "${SIMQ##*:}" \
    --save-result --save-prompts --result-dir ucm
fi
# The AIPerf seed command, unchanged but for the server (the README's and the docs page's).
run docs/coming-from-aiperf.md 0 "$BIN/aiperf" profile --model llm-sim --endpoint-type chat \
  --streaming --url "${SIM#http://}" --input-file "$TRACE" --custom-dataset-type mooncake_trace \
  --fixed-schedule --request-count 20
run README.md:174 0 "$RS" analyze "$TRACE" --json --plot-dir plots --instances 4 --routing prefix-aware
run README.md:175 0 "$RS" report results/run1.jsonl --goodput ttft:2000 tpot:50 --result-dir rep
run README.md:179 0 "$RS" sweep --scale-factors 0.5,1,2,4 --endpoint "$SIM" \
  --dataset-path "$TRACE" --max-requests 20 --goodput ttft:2000 tpot:50 --target 0.95
run README.md:180 0 "$RS" sweep --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --goodput ttft:2000 tpot:50 --target 0.95 --search 1,8 --max-points 3 --tolerance 0.05
if needs_q README.md:184; then
  run README.md:184 0 "$RS" verify-prompts "$TRACE" --tokenizer "$Q"
fi
run README.md:186 0 "$BIN/llm-sim" --help

# docs/config.md: a run file, the run again from its summary, the schema, an experiment
printf '[target]\nendpoint = "%s"\n[trace]\ndataset-path = "%s"\nmax-requests = 10\n' "$SIM" "$TRACE" >"$T/run.toml"
run docs/config.md:config 0 "$RS" replay --config run.toml --scale-factor 4 -o cfg.jsonl --save-prompts cfg.prompts.jsonl
run docs/config.md:rerun 0 "$RS" replay --config cfg.jsonl.summary.json -o cfg2.jsonl --save-prompts cfg2.prompts.jsonl
run docs/config.md:rerun-same 0 cmp "$T/cfg.prompts.jsonl" "$T/cfg2.prompts.jsonl"
run docs/config.md:schema 0 "$RS" config schema
run README.md:five 0 "$BIN/client" --config run.toml --time-in-secs 5
run docs/config.md:experiment 0 "$RS" experiment "$ROOT/examples/experiment.toml" --dir exp

# docs/llm-sim.md
run docs/llm-sim.md:12 0 curl -sfN "$SIM/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"messages":[{"role":"user","content":"bake tomo"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}'
start_sim PRESET --preset qwen3-8b-h100
run docs/llm-sim.md:11 0 curl -sf "$PRESET/v1/models"
if [[ -x $BIN/examples/trace_hit_ratio ]]; then
  run docs/llm-sim.md:523 0 "$BIN/examples/trace_hit_ratio" --trace "$TRACE" --requests 60
fi
start_sim IDLE --idle-close-ms 5000
run docs/reliability.md:80 0 "$RS" replay --endpoint "$IDLE" --dataset-path "$TRACE" --max-requests 10

# docs/metrics.md, docs/scale-out.md, docs/server-metrics.md, docs/reliability.md: records
run docs/metrics.md:115 0 "$RS" report results/run1.jsonl --goodput ttft:2000 --metric-percentiles 50,90,99 --result-dir rep2
run docs/scale-out.md:12a 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --shard 0/2 --seed 1 --output-path shards/a.jsonl
run docs/scale-out.md:12b 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --shard 1/2 --seed 1 --output-path shards/b.jsonl
run README.md:176 0 "$RS" compare results/run1.jsonl shards/a.jsonl
run docs/metrics.md:127 0 "$RS" report shards/a.jsonl shards/b.jsonl --expected-requests 60
run docs/scale-out.md:125 0 "$RS" report shards --expected-requests 60
run docs/server-metrics.md:78 0 "$RS" report results/run1.jsonl --result-dir rep3
run docs/reliability.md:108 0 "$RS" report results/run1.jsonl

# docs/traces.md
run docs/traces.md:226 0 "$RS" analyze "$TRACE" --json
run docs/traces.md:144 0 bash -c "head -30 '$TRACE' | '$RS' analyze -"
run docs/traces.md:144b 0 bash -c "head -30 '$TRACE' | '$RS' replay --endpoint '$SIM' --dataset-path -"
# docs/transform.md
run docs/transform.md:amplify 0 "$RS" transform "$TRACE" -o amp.jsonl --amplify 4 --seed 1 --compare
run docs/transform.md:retime 0 "$RS" transform "$TRACE" -o re.jsonl --retime gamma --rate 5 --burstiness 2 --max-idle-gap 30 --sample-sessions 0.5 --time-window 0..600
run docs/transform.md:scale 0 "$RS" transform "$TRACE" -o sc.jsonl --prefix-scale 2 --prompt-scale 0.5 --max-input-length 8000
printf '0 1\n60 4\n' > "$T/rates.txt"
run docs/transform.md:series 0 "$RS" transform "$TRACE" -o rs.jsonl --rate-series "$T/rates.txt"
run docs/transform.md:synth 0 "$RS" transform "$TRACE" -o syn.jsonl --synthesize --duration 600 --rate 2 --seed 1
run docs/transform.md:against 0 "$RS" analyze "$TRACE" --against amp.jsonl
run docs/transform.md:replay 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --amplify 2 --max-requests 20
gzip -kf "$TRACE"
run docs/traces.md:gz 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE.gz" --max-requests 10

# docs/prompts.md: a messages trace, a dry run with saved prompts, the verifier
printf '%s\n' '{"timestamp":0,"session_id":"s0","messages":[{"role":"user","content":" apple pie"}],"output_length":12}' \
  '{"timestamp":500,"session_id":"s0","messages":[{"role":"user","content":" apple pie"},{"role":"assistant","content":" tomato"},{"role":"user","content":" bake it"}],"output_length":12}' \
  >"$T/messages.jsonl"
run docs/prompts.md:308 0 "$RS" replay --endpoint "$SIM" --dataset-path "$T/messages.jsonl"
run docs/prompts.md:dry 0 "$RS" replay --dry-run --dataset-path "$TRACE" --max-requests 10 --save-prompts saved.jsonl
if needs_q docs/prompts.md:376; then
  run docs/prompts.md:376 0 "$RS" verify-prompts "$TRACE" --tokenizer "$Q" --max-requests 60
  if [[ -x $BIN/examples/verify_prompts ]]; then
    run docs/prompts.md:374 0 "$BIN/examples/verify_prompts" "$TRACE" "$Q" 60
  fi
fi

# docs/apis.md: the conversation APIs against llm-sim (when this build has them)
if "$RS" replay --api nonsense 2>&1 | grep -q 'responses'; then
  for api in responses messages; do
    run "docs/apis.md:$api" 0 "$RS" replay --endpoint "$SIM" --api "$api" --dataset-path "$TRACE" --max-requests 20
    run "docs/apis.md:$api-ns" 0 "$RS" replay --endpoint "$SIM" --api "$api" --no-stream --dataset-path "$TRACE" --max-requests 20
  done
fi

# README "Other commands" and docs/metrics.md: repeats, the measure window, compare and its gate.
run README.md:177 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --repeat 2 --result-dir rep-a
run README.md:177b 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --repeat 2 --result-dir rep-b
run README.md:176b 0 "$RS" compare rep-a rep-b --html cmp.html --json
run README.md:178 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 30 \
  --measure-window 1..5 --output-path win.jsonl
run docs/metrics.md:287 0 "$RS" report win.jsonl --measure-window auto
# The gate: the same slice against the fast llm-sim and against the H100-shaped one (TTFT of
# ~7 ms TPOT instead of ~1 ms): it passes on a run against itself and trips (7) on the slower.
run docs/metrics.md:270a 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --seed 1 --output-path gate/fast.jsonl
run docs/metrics.md:270b 0 "$RS" replay --endpoint "$PRESET" --dataset-path "$TRACE" --max-requests 20 \
  --seed 1 --output-path gate/slow.jsonl
run docs/metrics.md:270c 0 "$RS" compare gate/fast.jsonl gate/fast.jsonl --fail-if-worse mean_tpot_ms:5
run README.md:106 7 "$RS" compare gate/fast.jsonl gate/slow.jsonl --fail-if-worse mean_tpot_ms:5

# README and docs/server-metrics.md: --metrics-port, the page scraped while the run goes.
MPORT=$(free_port)
run README.md:97 0 bash -c "
  '$RS' replay --endpoint '$SIM' --dataset-path '$TRACE' --max-requests 30 \
    --metrics-port $MPORT --metrics-linger 1 --output-path live.jsonl & p=\$!
  seen=1
  for _ in \$(seq 1 300); do
    curl -sf http://127.0.0.1:$MPORT/metrics | grep -q '^request_sim:requests_total' && { seen=0; break; }
    sleep 0.05
  done
  wait \$p || exit \$?
  (( seen == 0 )) || { echo 'error: no request_sim:requests_total on the --metrics-port page'; exit 1; }"

# README "Agentic workloads", docs/traces.md "Agent corpora", docs/server-metrics.md: the test
# corpora (a Weka directory; TraceLab, Dynamo and dag_jsonl files) replayed, analyzed, swept.
AGENTS=$ROOT/request-sim/tests/data/agents
AGENT_FILES=$ROOT/request-sim/tests/data/traces/agent
run README.md:60 0 "$RS" replay --endpoint "$SIM" --dataset-path "$AGENTS" --users 2 \
  --max-idle-gap 0.05 --share-system-prefix --session-header x-session-id
run README.md:65 0 "$RS" replay --endpoint "$SIM" --dataset-path "$AGENTS" --session-rate 4 \
  --max-requests 30 --max-idle-gap 0.05
for f in tracelab.jsonl dynamo.jsonl.gz dag.jsonl; do
  run "docs/traces.md:259-$f" 0 "$RS" replay --endpoint "$SIM" --dataset-path "$AGENT_FILES/$f" --max-idle-gap 0.05
done
run docs/traces.md:442 0 "$RS" analyze "$AGENTS" --max-idle-gap 1 --users 4
run docs/traces.md:442b 0 "$RS" analyze "$AGENT_FILES/dynamo.jsonl" --json
run docs/server-metrics.md:290 0 "$RS" sweep --users 1,2,4 --endpoint "$SIM" \
  --dataset-path "$AGENTS" --time-in-secs 3 --max-idle-gap 10 --goodput ttft:2000 tpot:50 \
  --sweep-dir results/users1
run docs/server-metrics.md:296 0 "$RS" sweep --users 1,4 --endpoint "$SIM" --dataset-path "$AGENTS" \
  --max-idle-gap 0.05 --sweep-dir results/users2
run docs/server-metrics.md:274 0 "$RS" sweep --scale-factors 0.5,1,2,4 --endpoint "$SIM" \
  --dataset-path "$TRACE" --max-requests 20 --goodput ttft:2000 tpot:50 --target 0.95 \
  --sweep-dir results/sweep1
run docs/server-metrics.md:282 0 "$RS" sweep --endpoint "$SIM" --dataset-path "$TRACE" \
  --max-requests 20 --goodput ttft:2000 tpot:50 --target 0.95 --search 1,8 \
  --max-points 3 --tolerance 0.05 --sweep-dir results/search1

# README: prompts from a corpus, sessions, server metrics, drift and error limits.
CORPUS=$ROOT/request-sim/tests/data/corpus
run README.md:79 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --prompt-corpus "$CORPUS/txt"
run README.md:80 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --prompt-corpus "$CORPUS/rows.jsonl" --prompt-corpus-field text
run README.md:50 0 "$RS" transform "$TRACE" -o sessions.jsonl --infer-sessions
run README.md:51 0 "$RS" replay --endpoint "$SIM" --dataset-path sessions.jsonl --max-requests 30 \
  --timing closed --think-time trace --skip-after-failed-parent --session-user --session-header x-session-id
run README.md:55 0 "$RS" replay --endpoint "$SIM" --dataset-path "$T/messages.jsonl" \
  --timing closed --live-history
run README.md:89 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --server-metrics "$SIM/metrics,$PRESET/metrics" --metrics-interval 0.2 --record-itl
run README.md:100 0 "$RS" replay --endpoint "$SIM" --dataset-path "$TRACE" --max-requests 20 \
  --max-drift-ms 1000 --strict --max-error-rate 0.5 --no-server-metrics

# docs/transform.md "A what-if": a window, copies, inferred sessions, replayed through llm-sim's
# built-in router in front of two instances.
run docs/transform.md:101 0 "$RS" transform "$TRACE" -o win.jsonl --time-window 0..900
run docs/transform.md:102 0 "$RS" transform win.jsonl -o win_amp4.jsonl --amplify 4 --seed 1
run docs/transform.md:103 0 "$RS" transform win.jsonl -o win_sessions_amp4.jsonl --infer-sessions --amplify 4 --seed 1
RPORT=$(free_port)
start_sim CLUSTER --instances 2 --router prefix-aware --router-port "$RPORT" --preset fast \
  --speedup 10 --num-gpu-blocks 500000
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$RPORT/v1/models" && break; sleep 0.1; done
run docs/transform.md:105 0 "$RS" replay --dataset-path win_amp4.jsonl --endpoint "http://127.0.0.1:$RPORT" \
  --scale-factor 4 --seed 1 --session-header x-session-id --max-requests 60

# docs/convert.md and the README's convert row: a request log made as the page's "Measured"
# made it (scripts/make_conversation_log.py; here from six inline dialogs), compressed as the
# page's first example, converted, and the trace and the kept text replayed.
python3 - "$T/dialogs.json" <<'EOF'
import json, sys
verticals = ["coffee", "pizza", "burgers"]
items = ["a large latte", "a pepperoni pizza", "two cheeseburgers", "a green tea", "garlic bread", "fries"]
dialogs = []
for d in range(6):
    item = items[d]
    dialogs.append({"vertical": verticals[d % 3], "utterances": [
        {"speaker": "user", "text": f"Hi, I would like to order {item} please."},
        {"speaker": "assistant", "text": f"Sure, {item}. Anything else with that?"},
        {"speaker": "user", "text": "No, that is all. How long will it take?"},
        {"speaker": "assistant", "text": "About ten minutes. Thank you for your order!"},
    ]})
json.dump(dialogs, open(sys.argv[1], "w"))
EOF
if needs_q docs/convert.md:4; then
  run docs/convert.md:164 0 python3 "$ROOT/scripts/make_conversation_log.py" "$T/dialogs.json" -o conv_log.jsonl --rate 2
  (cd "$T" && zstd -qf conv_log.jsonl -o requests.jsonl.zst)
  run docs/convert.md:4 0 "$RS" convert requests.jsonl.zst -o trace.jsonl --tokenizer "$Q" --block-size 16
  run docs/convert.md:5 0 "$RS" replay --dataset-path trace.jsonl --block-size 16 --endpoint "$SIMQ" \
    --tokenizer "$Q" --scale-factor 4
  run docs/convert.md:171 0 "$RS" convert conv_log.jsonl -o conv_trace.jsonl --tokenizer "$Q" \
    --block-size 16 --keep-text conv_text.jsonl
  run docs/convert.md:174 0 "$RS" replay --endpoint "$SIMQ" --dataset-path conv_trace.jsonl --block-size 16 \
    --tokenizer "$Q" --scale-factor 20
  run docs/convert.md:175 0 "$RS" replay --endpoint "$SIMQ" --dataset-path conv_text.jsonl --dataset messages \
    --scale-factor 20
  run README.md:185 0 "$RS" convert conv_log.jsonl -o conv_trace2.jsonl --tokenizer "$Q" --block-size 16 \
    --keep-text conv_text2.jsonl --forget-after 600 --reorder-window 60
  run docs/convert.md:17 0 bash -c "gzip -c conv_log.jsonl | '$RS' convert - -o conv_stdin.jsonl --tokenizer '$Q' --json --no-analyze"
  run docs/convert.md:23 0 "$RS" convert "$ROOT/request-sim/tests/data/logs/litellm.jsonl" -o lite.jsonl \
    --tokenizer "$Q" --session-field trace_id
  run docs/convert.md:24 0 "$RS" convert "$ROOT/request-sim/tests/data/logs/otel.jsonl" -o otel.jsonl \
    --tokenizer "$Q" --log-format otel
  run docs/convert.md:51 0 "$RS" convert conv_log.jsonl -o conv_ep.jsonl --endpoint "$SIMQ" --model "$Q" \
    --block-size 16 --no-analyze
fi

# The exit statuses docs/reliability.md documents: nothing succeeded.
CLOSED=$(free_port)
run docs/reliability.md:exit 5 "$RS" replay --endpoint "http://127.0.0.1:$CLOSED" --chat-overhead 0 --model-name m --allow-inexact-prompts --dataset-path "$TRACE" --max-requests 5

echo
echo "== flags named in README.md and docs/ that no command has"
KNOWN=$T/known.txt
# Every subcommand's help, the list read from `request-sim --help` (a new subcommand counts
# without an edit here).
SUBCOMMANDS=$("$RS" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && $1 != "help" && NF {print $1}')
[[ -n "$SUBCOMMANDS" ]] || { echo "no subcommands in request-sim --help"; exit 100; }
{
  "$RS" --help
  for c in $SUBCOMMANDS; do "$RS" "$c" --help; done
  "$BIN/client" --help; "$BIN/trace_replay" --help; "$BIN/aiperf" profile --help
  "$BIN/llm-sim" --help
  # Every `aiperf profile` flag the aiperf binary accepts (most without effect).
  grep -o '"--[a-z0-9-]*"' request-sim/src/compat/aiperf_flags.rs | tr -d '"'
} 2>/dev/null | grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u >"$KNOWN"
# Other tools' flags the pages quote (cargo, vLLM, llama.cpp, AIPerf, UCM's accepted-and-ignored
# flags, this repository's scripts: make_azure2024_csv.py --rows, gen-copilot.py --day --jobs,
# make-parquet-trace.py --schema; vLLM's --enable-prefix-caching;
# vLLM's plot script --var-x/--var-y; the AIPerf flag that does not exist, --artifact-directory;
# podman's --entrypoint; vLLM's --kv-events-config), and anchors of headings.
cat >>"$KNOWN" <<'EOF'
--all
--kv-events-config
--entrypoint
--enable-prefix-caching
--schema
--all-targets
--cfg
--artifact-directory
--bench
--day
--jobs
--var-x
--var-y
--bin
--build-only
--burstiness
--check
--custom-dataset-type
--enable-auto-tool-choice
--enable-prompt-tokens-details
--example
--extra-body
--gpu-memory-utilization
--ignored
--input-file
--jinja
--limit-mm-per-prompt
--reasoning-config
--reasoning-parser
--tool-call-parser
--max-concurrency
--metrics
--no-default-features
--nocapture
--num-prompts
--preset-simconfigpreset
--release
--request-rate
--requests
--rows
--skip-mm-profiling
--test
--trace
--workspace
EOF
sort -u -o "$KNOWN" "$KNOWN"
UNKNOWN=$(grep -on -- '--[a-z0-9][a-z0-9-]*' README.md docs/*.md \
  | awk -F: '{print $3" "$1":"$2}' | sort -k1,1 | join -v1 - "$KNOWN")
if [[ -n "$UNKNOWN" ]]; then
  echo "$UNKNOWN"
  FAILS=$((FAILS + $(echo "$UNKNOWN" | awk '{print $1}' | sort -u | wc -l)))
else
  echo "none"
fi
echo
echo "== the trace and prompt pages, with what each command must print (scripts/doc-commands-traces.sh)"
if ! BIN_DIR="$BIN" scripts/doc-commands-traces.sh; then
  FAILS=$((FAILS + 1))
fi
echo
echo "$RUNS commands run here, plus those of scripts/doc-commands-traces.sh; $FAILS failure(s)"
exit $((FAILS > 100 ? 100 : FAILS))
