#!/usr/bin/env bash
# Image requests against llm-sim (issue #42, docs/images.md, docs/performance.md "Image
# requests"): an Azure-LMM-shaped trace (scripts/lmm-trace.py: 1-4 images of 448x448, 300-8,000
# context tokens, 30% of rows repeating earlier image ids) at 100 req/s, replayed against one
# llm-sim in its own process, so /usr/bin/time gives the client's CPU alone. Prints, per round:
# records = rows, prompts exact, image tokens exact, drift p50/p99/max, the client's user+sys
# seconds and per image request (image encoding and bytes included), the producers' build time
# per body, body bytes per request, llm-sim's CPU seconds.
#
#   scripts/bench-images.sh                       # N=2000 rows, RATE=100, ROUNDS=1
#   NO_BUILD=1 BIN_DIR=… N=2000 RATE=100 ROUNDS=3 PORT=19360 scripts/bench-images.sh
#
# Loopback only; every run is bounded by the trace's length, --time-in-secs and `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
BIN_DIR="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
N="${N:-2000}"
RATE="${RATE:-100}"
ROUNDS="${ROUNDS:-1}"
PORT="${PORT:-19360}"
[[ "${NO_BUILD:-0}" == 1 ]] || cargo build --release -q -p request-sim -p llm-sim --bins
OUT="$(mktemp -d)"
python3 scripts/lmm-trace.py "$OUT/lmm.csv" --requests "$N" --rate "$RATE"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port "$PORT" --preset fast --prefill-token-us 0.01 \
    --max-num-seqs 1024 --max-num-batched-tokens 1048576 --worker-threads 1 2>"$OUT/llm-sim.log" &
SIM=$!
trap 'kill $SIM 2>/dev/null || true; wait $SIM 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done
TCK="$(getconf CLK_TCK)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'round\trecords/rows\texact\timage exact\tdrift p50/p99/max ms\tclient user+sys s\tper image request ms\tbuild per body ms\tbody KB\tllm-sim cpu s\n'
for r in $(seq "$ROUNDS"); do
    rec="$OUT/r$r.jsonl"
    sb=$(awk '{print $14 + $15}' "/proc/$SIM/stat")
    timeout 300 /usr/bin/time -f '%U %S' -o "$OUT/time" "$BIN_DIR/request-sim" replay \
        --dataset-path "$OUT/lmm.csv" --endpoint "http://127.0.0.1:$PORT" --quiet -o "$rec" \
        --seed "$r" --time-in-secs 120 >"$OUT/console.txt" 2>"$OUT/stderr.txt" || true
    sa=$(awk '{print $14 + $15}' "/proc/$SIM/stat")
    python3 - "$rec" "$rec.summary.json" "$OUT/time" "$N" "$r" "$(( sa - sb ))" "$TCK" <<'PY'
import json, sys
rec, summ, tfile, n, rnd, sim_ticks, tck = sys.argv[1:8]
rs = [json.loads(l) for l in open(rec) if l.strip()]
s = json.load(open(summ))
u, sy = map(float, open(tfile).read().split())
img = s.get("images") or {}
d = s["drift"]
prod = (s.get("run") or {}).get("producer") or {}
bodies = prod.get("bodies") or len(rs)
build_ms = 1e3 * prod.get("build_s", 0.0) / max(bodies, 1)
kb = prod.get("body_bytes", 0) / max(bodies, 1) / 1024
ex = s["token_exactness"]
print("\t".join(str(x) for x in [
    rnd, f"{len(rs)}/{n}", f"{ex['exact']}/{ex['with_usage']}",
    f"{img.get('image_tokens_exact')}/{img.get('with_image_usage')}",
    f"{d['p50_ms']:.3f}/{d['p99_ms']:.3f}/{d['max_ms']:.3f}", f"{u + sy:.2f}",
    f"{1e3 * (u + sy) / max(img.get('requests', 0), 1):.3f}", f"{build_ms:.3f}", f"{kb:.1f}",
    f"{int(sim_ticks) / int(tck):.2f}"]))
PY
done
