#!/usr/bin/env bash
# A real Prometheus scrapes a replay's live client metrics (--metrics-port, issue 29): starts
# llm-sim (PRESET) and Debian's `prometheus` on 127.0.0.1 (scrape interval 1 s, pointed at the
# replay's metrics port), replays a steady-rate generated trace for DURATION seconds, then asks
# Prometheus' HTTP API for
#   - the ok-request counter, which must equal the records' ok count, and
#   - the whole-run p99 TTFT from the final bucket counts,
#     histogram_quantile(0.99, sum by (le) (last_over_time(..._bucket[...]))),
#     whose bucket (the one Prometheus interpolates in) must hold the summary's p99 TTFT.
# Installs the `prometheus` package with apt-get when it is missing. Not run by CI (it takes
# about DURATION + 30 s and needs the package). Exit 0 when both agree, 1 when not, 2 when
# something could not start.
#
#   scripts/prometheus-check.sh
#   BIN_DIR=target/debug NO_BUILD=1 scripts/prometheus-check.sh   # the debug binaries
#
# Environment: PRESET [qwen3-8b-h100], DURATION [60] s, RATE [5] req/s, INPUT [1024] and OUTPUT
# [64] tokens per request, SEED [1], BIN_DIR [target/release], NO_BUILD, OUT. Loopback only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PRESET="${PRESET:-qwen3-8b-h100}"
DURATION="${DURATION:-60}"
RATE="${RATE:-5}"
INPUT="${INPUT:-1024}"
OUTPUT="${OUTPUT:-64}"
SEED="${SEED:-1}"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
OUT="${OUT:-bench-results/prometheus-check-$(date -u +%Y%m%d-%H%M%S)}"
fail() { echo "prometheus-check: $*" >&2; exit 2; }

if ! command -v prometheus >/dev/null; then
    echo "prometheus-check: installing Debian's prometheus package" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; } >&2 ||
        fail "cannot install the prometheus package (apt-get install -y prometheus)"
fi
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim -p llm-sim --bins >&2
fi
[[ -x "$BIN_DIR/request-sim" && -x "$BIN_DIR/llm-sim" ]] || fail "no request-sim/llm-sim in $BIN_DIR"
mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
METRICS_PORT="$(free_port)"
PROM_PORT="$(free_port)"
RUN_ID="prometheus-check-$(date -u +%s)"

# A steady-rate trace: DURATION x RATE requests evenly spaced, distinct prompts.
TRACE="$OUT/trace.jsonl"
python3 - "$TRACE" "$DURATION" "$RATE" "$INPUT" "$OUTPUT" <<'EOF'
import json, sys
path, duration, rate, inp, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
n = int(duration * rate)
blocks = (inp + 511) // 512
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"timestamp": round(i * 1000.0 / rate, 3), "input_length": inp,
                            "output_length": out, "hash_ids": list(range(i * blocks, (i + 1) * blocks))}) + "\n")
EOF

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

SIM_LOG="$OUT/llm-sim.log"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port 0 --preset "$PRESET" 2>"$SIM_LOG" &
PIDS+=($!)
ENDPOINT=""
for _ in $(seq 600); do
    ENDPOINT="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$SIM_LOG" | head -1 | awk '{print $3}' || true)"
    [[ -n "$ENDPOINT" ]] && break
    sleep 0.05
done
[[ -n "$ENDPOINT" ]] || { cat "$SIM_LOG" >&2; fail "llm-sim did not start"; }

cat >"$OUT/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: request-sim
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
EOF
PROM="http://127.0.0.1:$PROM_PORT"
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" 2>"$OUT/prometheus.log" &
PIDS+=($!)
for _ in $(seq 300); do
    curl -sf "$PROM/-/ready" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "$PROM/-/ready" >/dev/null || { tail -20 "$OUT/prometheus.log" >&2; fail "prometheus did not start"; }

echo "llm-sim --preset $PRESET at $ENDPOINT; $(wc -l <"$TRACE") requests at $RATE req/s ($INPUT in, $OUTPUT out); prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') at $PROM scraping 127.0.0.1:$METRICS_PORT every 1 s"
"$BIN_DIR/request-sim" replay --endpoint "$ENDPOINT" --dataset-path "$TRACE" --seed "$SEED" \
    --metrics-port "$METRICS_PORT" --metrics-run-id "$RUN_ID" --metrics-linger 5 \
    --output-path "$OUT/records.jsonl" --summary-path "$OUT/summary.json" --quiet \
    >"$OUT/replay.stdout" 2>"$OUT/replay.stderr" ||
    { tail -20 "$OUT/replay.stderr" >&2; fail "the replay failed"; }
T_END="$(date +%s.%N)"

python3 - "$PROM" "$RUN_ID" "$T_END" "$OUT" <<'EOF'
import json, sys, urllib.parse, urllib.request
prom, run, t_end, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]

def query(q):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": f"{t_end:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        sys.exit(f"prometheus-check: query failed: {q}: {body}")
    return body["data"]["result"]

# Range vectors skip the staleness markers written when the replay stopped serving, so the
# last value over the run is the final one.
sel = f'run_id="{run}"'
win = "[10m]"
ok_prom = query(f'last_over_time(request_sim:requests_total{{{sel},status="ok"}}{win})')
ok_prom = float(ok_prom[0]["value"][1]) if ok_prom else float("nan")
bucket = f"last_over_time(request_sim:time_to_first_token_seconds_bucket{{{sel}}}{win})"
p99_prom = query(f"histogram_quantile(0.99, sum by (le) ({bucket}))")
p99_prom = float(p99_prom[0]["value"][1]) if p99_prom else float("nan")
buckets = sorted(((float(r["metric"]["le"]), float(r["value"][1])) for r in query(f"sum by (le) ({bucket})")))
windowed = query(f"histogram_quantile(0.99, sum by (le) (rate(request_sim:time_to_first_token_seconds_bucket{{{sel}}}[30s])))")

scrapes = query(f"count_over_time(request_sim:requests_in_flight{{{sel}}}{win})")
peak = query(f"max_over_time(request_sim:requests_in_flight{{{sel}}}{win})")

records = [json.loads(l) for l in open(f"{out}/records.jsonl") if l.strip()]
ok_records = sum(1 for r in records if r["status"] == "ok")
summary = json.load(open(f"{out}/summary.json"))
p99_summary = summary["p99_ttft_ms"] / 1e3

# The bucket Prometheus interpolates in: the first whose cumulative count reaches 0.99 x total.
total = buckets[-1][1]
rank = 0.99 * total
lower = 0.0
for le, cum in buckets:
    if cum >= rank:
        upper = le
        break
    lower = le
inside = lower <= p99_summary <= upper
print(f"records: {len(records)}, ok {ok_records}; summary p99 TTFT {p99_summary * 1e3:.2f} ms, "
      f"mean {summary['mean_ttft_ms']:.2f} ms; send drift p99 {summary['drift']['p99_ms']:.3f} ms")
if scrapes and peak:
    print(f"prometheus: {float(scrapes[0]['value'][1]):.0f} scrapes of the page; requests in flight peaked at "
          f"{float(peak[0]['value'][1]):.0f}")
print(f"prometheus: request_sim:requests_total{{status=\"ok\"}} = {ok_prom:.0f} "
      f"({'equal' if ok_prom == ok_records else 'DIFFERENT'})")
print(f"prometheus: whole-run histogram_quantile(0.99) of the TTFT buckets = {p99_prom * 1e3:.2f} ms, "
      f"interpolated in the bucket ({lower * 1e3:g}, {upper * 1e3:g}] ms of {total:.0f} observations; "
      f"the summary's p99 {p99_summary * 1e3:.2f} ms is {'inside' if inside else 'OUTSIDE'} it")
if windowed:
    print(f"prometheus: last 30 s histogram_quantile(0.99, rate(...[30s])) at the end = "
          f"{float(windowed[0]['value'][1]) * 1e3:.2f} ms (what a dashboard panel shows)")
good = ok_prom == ok_records and inside
print("prometheus-check: " + ("OK" if good else "MISMATCH"))
sys.exit(0 if good else 1)
EOF
