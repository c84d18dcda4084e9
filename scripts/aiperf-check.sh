#!/usr/bin/env bash
# Third-party check of the `aiperf` front end and of `--export aiperf,vllm-bench` (not CI: it
# installs AIPerf from PyPI). It
#   1. installs AIPerf 0.13 into a venv when missing (.cache/aiperf/venv, gitignored);
#   2. starts llm-sim on 127.0.0.1:$PORT serving model "M";
#   3. runs AIPerf's trace-replay seed command UNCHANGED with request-sim's `aiperf` binary
#      first on PATH, on the first $ROWS rows of the trace (default: 1,000 rows of the Mooncake
#      conversation trace), at the trace's own timing;
#   4. checks with AIPerf's own pydantic models: every line of profile_export.jsonl through
#      MetricRecordInfo.model_validate_json, profile_export_aiperf.json through
#      JsonExportData, inputs.json through InputsFile; the records count; the aggregates
#      against summary.json (TTFT, ITL, TPOT, E2E latency: avg, p50, p99);
#   5. replays the same rows with `request-sim replay --export vllm-bench` (at --scale-factor
#      $VLLM_SCALE to keep it short) and checks the JSON with the keys vLLM's own
#      benchmarks/serve.py writes and its sweep plot reads (read from the installed vLLM's
#      sources when its venv is there), and its values against the run's summary.json.
#
# Usage: scripts/aiperf-check.sh [TRACE]   (env: ROWS, PORT, WORK, AIPERF_VENV, VLLM_VENV,
#        CARGO_TARGET_DIR, PROFILE=release|debug, SKIP_BUILD=1 to use binaries already built,
#        LLM_SIM=path of an llm-sim binary)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRACE_SRC=${1:-/work/shared/traces/mooncake_conversation_trace.jsonl}
ROWS=${ROWS:-1000}
PORT=${PORT:-19410}
VLLM_SCALE=${VLLM_SCALE:-10}
AIPERF_VENV=${AIPERF_VENV:-$ROOT/.cache/aiperf/venv}
VLLM_VENV=${VLLM_VENV:-$ROOT/.cache/vllm/venv}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${WORK:-$(mktemp -d /tmp/aiperf-check.XXXXXX)}
mkdir -p "$WORK"

if [ ! -x "$AIPERF_VENV/bin/python" ] || ! "$AIPERF_VENV/bin/python" -c 'import aiperf' 2>/dev/null; then
  echo "== installing AIPerf 0.13 into $AIPERF_VENV"
  python3 -m venv "$AIPERF_VENV"
  "$AIPERF_VENV/bin/pip" install -q 'aiperf==0.13.*'
fi
echo "== AIPerf $("$AIPERF_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aiperf"))')"

PROFILE=${PROFILE:-release}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if [ "$PROFILE" = release ]; then
    (cd "$ROOT" && cargo build --release -q -p request-sim -p llm-sim)
  else
    (cd "$ROOT" && cargo build -q -p request-sim -p llm-sim)
  fi
fi
BIN="$TARGET/$PROFILE"
LLM_SIM=${LLM_SIM:-$BIN/llm-sim}
mkdir -p "$WORK/bin"
ln -sf "$BIN/aiperf" "$WORK/bin/aiperf"

head -n "$ROWS" "$TRACE_SRC" > "$WORK/trace.jsonl"

"$LLM_SIM" --port "$PORT" --model-name M > "$WORK/llm-sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  sleep 0.2
done

echo "== the seed command, unchanged, in $WORK ($ROWS rows)"
(cd "$WORK" && PATH="$WORK/bin:$PATH" timeout 1800 \
  aiperf profile --model M --endpoint-type chat --streaming --url "127.0.0.1:$PORT" \
    --input-file trace.jsonl --custom-dataset-type mooncake_trace --fixed-schedule \
  > seed.log 2>&1) || { tail -20 "$WORK/seed.log"; exit 1; }

"$AIPERF_VENV/bin/python" - "$WORK/artifacts" "$ROWS" <<'PY'
import json, sys
from aiperf.common.models.record_models import MetricRecordInfo
from aiperf.common.models.export_models import JsonExportData
from aiperf.common.models.dataset_models import InputsFile

art, rows = sys.argv[1], int(sys.argv[2])
n = 0
with open(f"{art}/profile_export.jsonl") as f:
    for line in f:
        MetricRecordInfo.model_validate_json(line)
        n += 1
records = sum(1 for _ in open(f"{art}/request_sim_records.jsonl"))
print(f"records: {records}; profile_export.jsonl lines validated by MetricRecordInfo: {n}")
assert records == rows and n == rows, (records, n, rows)
agg = JsonExportData.model_validate_json(open(f"{art}/profile_export_aiperf.json").read())
inputs = InputsFile.model_validate_json(open(f"{art}/inputs.json").read())
payloads = sum(len(s.payloads) for s in inputs.data)
print(f"profile_export_aiperf.json loads as JsonExportData; inputs.json as InputsFile ({payloads} payloads)")
assert payloads == rows
s = json.load(open(f"{art}/summary.json"))
worst = 0.0
for tag, ours, tol in [("time_to_first_token", "ttft", 1e-9), ("inter_token_latency", "tpot", 1e-9),
                       ("request_latency", "e2el", 1e-9), ("inter_chunk_latency", "itl", 1e-3)]:
    m = getattr(agg, tag)
    for stat, key in [("avg", f"mean_{ours}_ms"), ("p50", f"p50_{ours}_ms"), ("p99", f"p99_{ours}_ms")]:
        a, b = getattr(m, stat), s[key]
        worst = max(worst, abs(a - b))
        print(f"  {tag}.{stat} = {a:.6f} ms   summary {key} = {b:.6f} ms")
        assert abs(a - b) <= tol, (tag, stat, a, b)
print(f"aggregates equal the summary's (largest difference {worst:.6g} ms)")
PY

echo "== replay --export vllm-bench (scale factor $VLLM_SCALE)"
"$BIN/request-sim" replay --dataset-path "$WORK/trace.jsonl" --endpoint "http://127.0.0.1:$PORT" \
  --model-name M --scale-factor "$VLLM_SCALE" --record-itl --export vllm-bench \
  --result-dir "$WORK/vllm" --output-path "$WORK/vllm/records.jsonl" -q > "$WORK/vllm.log" 2>&1 \
  || { tail -20 "$WORK/vllm.log"; exit 1; }

PY_VLLM=python3
[ -x "$VLLM_VENV/bin/python" ] && PY_VLLM="$VLLM_VENV/bin/python"
"$PY_VLLM" - "$WORK/vllm" "$ROWS" <<'PY'
import ast, json, sys
d, rows = sys.argv[1], int(sys.argv[2])
v = json.load(open(f"{d}/vllm-bench.json"))
s = json.load(open(f"{d}/summary.json"))
keys = None
try:
    import vllm.benchmarks.serve as serve
    tree = ast.parse(open(serve.__file__).read())
    keys = set()
    for node in ast.walk(tree):
        # result = {...} (the first dict is the generation result) and result_json["k"] = ...
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "result" for t in node.targets) and not keys:
                keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                        and t.value.id == "result_json" and isinstance(t.slice, ast.Constant)
                        and not t.slice.value.startswith("ramp_up")):
                    keys.add(t.slice.value)
    source = f"the installed vLLM's {serve.__file__}"
except ImportError:
    source = "a list taken from vLLM's benchmarks/serve.py"
    keys = {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
            "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
            "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
            "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts",
            "itls", "latencies", "start_times", "errors", "max_output_tokens_per_s",
            "max_concurrent_requests"}
# serve.py's percentile keys for its default --percentile-metrics ttft,tpot,itl and
# --metric-percentiles 99, and the sweep plot's default axes.
keys |= {f"{s_}_{m}_ms" for m in ("ttft", "tpot", "itl") for s_ in ("mean", "median", "std", "p99")}
keys |= {"total_token_throughput", "median_ttft_ms"}
keys -= {"queue_times", "generated_texts", "rtfx"}  # not measured by a trace replay
missing = sorted(k for k in keys if k not in v)
print(f"vllm-bench.json: {len(keys)} keys checked ({source}); missing: {missing}")
assert not missing
assert len(v["ttfts"]) == len(v["itls"]) == len(v["input_lens"]) == len(v["output_lens"]) == len(v["errors"]) == rows
for k in ["completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
          "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
          "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "median_e2el_ms", "p99_e2el_ms"]:
    print(f"  {k} = {v[k]}   summary: {s[k]}")
    assert v[k] == s[k], k
try:
    from vllm.benchmarks.plot import generate_dataset_stats_plot
    generate_dataset_stats_plot([{"prompt_len": i, "output_tokens": o}
                                 for i, o in zip(v["input_lens"], v["output_lens"])],
                                f"{d}/dataset_stats.png")
    print("vLLM's generate_dataset_stats_plot drew the per-request lengths")
except Exception as e:  # plotting extras not installed
    print(f"(vLLM's plot not run: {e})")
print("vLLM-shaped values equal the summary's")
PY
echo "== all checks passed ($WORK)"
