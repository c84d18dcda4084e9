#!/usr/bin/env bash
# Thinking and tool calls end to end against llm-sim (issue #40): N requests per API (chat,
# Responses, Messages), streamed, at low load, llm-sim thinking for a share of every answer
# (`--reasoning-share`), some rows with a thinking budget, and a share of the turns ending in a
# tool call (`--tool-call-share`, rows carry `tools`). Checks every record against what llm-sim
# generates (docs/llm-sim.md, "Thinking and tool calls"):
#   - thinking token events = r, where r = min(budget, n) or round(share × n);
#   - ITL samples = output tokens − 1 (llm-sim sends one token per chunk);
#   - TTFA (or the time to the first tool-call token) ≥ TTFT, and equal to TTFT + the first r
#     ITL gaps: the arrival of the first answer (tool) chunk, from the recorded ITL arrays;
#   - a tool turn: one call, no answer events, n − r tool events; a text turn: n − r answer events.
# Prints one row per API and exits 1 if any record fails.
#
#   scripts/check-turns.sh                       # builds (release), N=500
#   NO_BUILD=1 BIN_DIR=/path/release N=100 scripts/check-turns.sh
#
# Loopback only; each run is bounded by --time-in-secs and `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
BIN_DIR="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
N="${N:-500}"
PORT="${PORT:-18793}"
SHARE="${SHARE:-0.5}"
TOOLS="${TOOLS:-0.3}"
GAP_MS="${GAP_MS:-40}"
[[ "${NO_BUILD:-0}" == 1 ]] || cargo build --release -q -p request-sim -p llm-sim --bins
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
"$BIN_DIR/llm-sim" --host 127.0.0.1 --port "$PORT" --reasoning-share "$SHARE" \
    --tool-call-share "$TOOLS" 2>"$OUT/llm-sim.log" &
SIM=$!
trap 'kill $SIM 2>/dev/null || true; wait $SIM 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done

# One messages trace per API: distinct prompts, n from 2 to 41, tools on every row; every
# fifth row carries the API's thinking budget (none on Responses: it has no budget field).
python3 - "$OUT" "$N" "$GAP_MS" <<'PY'
import json, sys
out, n, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
tools = [{"type": "function", "function": {"name": "lookup", "description": "Look a word up",
          "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}]
for api in ("chat", "responses", "messages"):
    with open(f"{out}/{api}.jsonl", "w") as f:
        for i in range(n):
            length = 2 + i % 40
            row = {"timestamp": i * gap, "output_length": length, "tools": tools,
                   "messages": [{"role": "user", "content": f"Turn {i}: say something about {i * 7919 % 1000}"}]}
            budget = 1 + i % 7
            if i % 5 == 0 and api == "chat":
                row["extra"] = {"thinking_token_budget": budget}
            elif i % 5 == 0 and api == "messages" and budget < length:
                row["extra"] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
            f.write(json.dumps(row) + "\n")
PY

fail=0
for api in chat responses messages; do
    case $api in
        chat) ep="/v1/chat/completions" ;;
        responses) ep="/v1/responses" ;;
        messages) ep="/v1/messages" ;;
    esac
    timeout 300 "$BIN_DIR/request-sim" replay --endpoint "http://127.0.0.1:$PORT$ep" \
        --model-name llm-sim --stream --record-itl --dataset-path "$OUT/$api.jsonl" \
        --output-path "$OUT/$api-records.jsonl" --time-in-secs 240 --quiet \
        >"$OUT/$api.out" 2>"$OUT/$api.err" || { echo "$api: replay failed: $(tail -1 "$OUT/$api.err")"; fail=1; continue; }
    python3 - "$api" "$OUT/$api.jsonl" "$OUT/$api-records.jsonl" "$SHARE" <<'PY' || fail=1
import json, math, sys
api, trace, recs, share = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rows = {i: json.loads(l) for i, l in enumerate(open(trace), 1)}
bad, ok, tools, budgeted = [], 0, 0, 0
def expect_r(row, n):
    e = row.get("extra") or {}
    if "thinking_token_budget" in e:
        return min(e["thinking_token_budget"], n)
    if "thinking" in e:
        return min(e["thinking"]["budget_tokens"], n)
    return math.floor(share * n + 0.5)  # Rust's f64::round: half away from zero
def near(a, b, gaps):
    # Records keep times to the µs: TTFT and TTFA rounded, each ITL gap cut to whole µs.
    return abs(a - b) <= 0.001 * (gaps + 1) + 1e-9
recs = [json.loads(l) for l in open(recs)]
for r in recs:
    row = rows[r["line"]]
    n = row["output_length"]
    why = []
    if r["status"] != "ok":
        bad.append((r["index"], r["status"], r.get("error")))
        continue
    ok += 1
    want = expect_r(row, n)
    budgeted += "extra" in row
    got = r.get("reasoning_tokens") or 0
    itl = r.get("itl_ms") or []
    tool = bool(r.get("tool_calls"))
    tools += tool
    if got != want:
        why.append(f"thinking {got} != {want}")
    if r.get("output_tokens") != n or r["chunks"] != n:
        why.append(f"output {r.get('output_tokens')} / chunks {r['chunks']} != {n}")
    if len(itl) != n - 1:
        why.append(f"{len(itl)} ITL samples for {n} tokens")
    rest = n - want
    first = r.get("ttf_tool_ms") if tool else r.get("ttfa_ms")
    if rest > 0:
        if first is None or first < r["ttft_ms"]:
            why.append(f"first {'tool' if tool else 'answer'} {first} vs TTFT {r['ttft_ms']}")
        elif not near(first, r["ttft_ms"] + sum(itl[:want]), want):
            why.append(f"first {'tool' if tool else 'answer'} {first} != TTFT + {want} gaps {r['ttft_ms'] + sum(itl[:want]):.3f}")
    if tool and (r.get("tool_calls") != 1 or (r.get("answer_tokens") or 0) != 0):
        why.append(f"tool turn: calls {r.get('tool_calls')}, answer events {r.get('answer_tokens')}")
    if not tool and (r.get("answer_tokens") or 0) != rest:
        why.append(f"answer events {r.get('answer_tokens')} != {rest}")
    if why:
        bad.append((r["index"], "; ".join(why)))
print(f"{api:<10} records {len(recs)}/{len(rows)}  ok {ok}  tool turns {tools}  budget rows {budgeted}  "
      f"records failing the checks {len(bad)}")
for b in bad[:5]:
    print("   ", b)
sys.exit(1 if bad or len(recs) != len(rows) else 0)
PY
done
echo "records and traces: $OUT"
exit "$fail"
