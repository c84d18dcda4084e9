#!/usr/bin/env bash
# Runs the commands that docs/traces.md, docs/prompts.md and the README's trace and prompt
# parts document, on the test fixtures and small generated traces, and checks what each must
# say (issue 30: "every command in the docs run"). Offline and bounded: dry runs and the
# built-in simulator only, a few seconds with debug binaries. Commands that need a downloaded
# tokenizer run only when `.cache/tokenizers/qwen3` exists (scripts/fetch-tokenizer.sh).
#
#   scripts/doc-commands-traces.sh           # uses target/debug (cargo build first)
#   BIN_DIR=target/release scripts/doc-commands-traces.sh
#
# Prints one `ok` or `FAIL` line per command and exits 1 if any failed. Needs: jq.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN_DIR="${BIN_DIR:-target/debug}"
RS="$BIN_DIR/request-sim"
DATA=request-sim/tests/data/traces
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
FAILED=0

# check NAME WANT COMMAND...: run COMMAND (stdout + stderr), expect exit 0 and WANT in the
# output (a grep -F pattern; empty = anything).
check() {
    local name="$1" want="$2"
    shift 2
    local out rc
    out="$("$@" 2>&1)"
    rc=$?
    if [[ $rc -eq 0 && ( -z "$want" || "$out" == *"$want"* ) ]]; then
        echo "ok    $name"
    else
        echo "FAIL  $name (exit $rc; wanted: $want)"
        echo "$out" | tail -5 | sed 's/^/      /'
        FAILED=1
    fi
}

[[ -x "$RS" ]] || { echo "no $RS: cargo build -p request-sim first" >&2; exit 1; }

# docs/traces.md: formats, detection, compression, standard input.
for f in mooncake.jsonl bailian.jsonl azure.csv generic.jsonl mooncake.jsonl.gz; do
    check "analyze $f" "Trace Analysis" "$RS" analyze "$DATA/$f"
done
check "analyze azure: no block size" "none (no hash ids" "$RS" analyze "$DATA/azure.csv"
check "analyze a servegen directory" "servegen" "$RS" analyze request-sim/tests/data/servegen/reason
check "replay a servegen reason workload" "Thinking = trace's reasoning length:" \
    "$RS" replay --dataset-path request-sim/tests/data/servegen/reason --max-requests 4 --scale-factor 50 -o "$TMP/servegen.jsonl"
check "transform a servegen slice keeps reasoning_tokens" "reasoning_tokens" bash -c \
    "$RS transform request-sim/tests/data/servegen/reason --time-window 0..20 -o - 2>/dev/null | head -1"
check "zcat | analyze -" "Requests:" bash -c "zcat $DATA/mooncake.jsonl.gz | $RS analyze -"
check "analyze --json" "" bash -c "$RS analyze $DATA/mooncake.jsonl --json | jq -e .prefix_cache.hit_ratio"
check "analyze --instances 4 --routing" "Upper bound of any policy" \
    "$RS" analyze "$DATA/mooncake.jsonl" --instances 4 --routing round-robin,session,prefix-aware
check "replay --dataset-path - (stdin)" "trace <stdin>" \
    bash -c "cat $DATA/mooncake.jsonl | $RS replay --dataset-path - --dry-run --scale-factor 1000 -o $TMP/stdin.jsonl"
{ head -2 "$DATA/mooncake.jsonl"; echo '{"timestamp": 5, "input_length": "600"}'; } > "$TMP/invalid.jsonl"
check "--skip-invalid says so" "1 invalid row(s) of $TMP/invalid.jsonl skipped, not replayed; first: $TMP/invalid.jsonl:3:" \
    "$RS" replay --dataset-path "$TMP/invalid.jsonl" --skip-invalid --dry-run --scale-factor 1000 -o "$TMP/skip.jsonl"

# docs/traces.md: sessions (a generic trace with session_id and hash_ids is detected as
# generic and replayed closed-loop).
for s in 0 1 2; do
    for t in 0 1 2; do
        echo "{\"session_id\": \"s$s\", \"timestamp\": $((s * 10 + t * 100)), \"input_length\": $((64 * (t + 1))), \"output_length\": 2, \"hash_ids\": [$((s * 10)), $((s * 10 + t + 1))]}"
    done
done > "$TMP/sessions.jsonl"
check "replay --timing closed --think-time trace" "Timing:                                  closed" \
    "$RS" replay --dataset-path "$TMP/sessions.jsonl" --block-size 64 --timing closed --think-time trace \
    --scale-factor 10 -o "$TMP/closed.jsonl"
check "analyze: sessions of session_id rows" "Sessions:" "$RS" analyze "$TMP/sessions.jsonl"

# docs/prompts.md: saved prompts (a dry run without --endpoint is exact: the built-in
# simulator's template), replayed as a messages trace.
check "replay --dry-run --save-prompts" "saved the prompts of" \
    "$RS" replay --dataset-path "$DATA/mooncake.jsonl" --dry-run --scale-factor 1000 \
    --save-prompts "$TMP/saved.jsonl" -o "$TMP/dry.jsonl"
check "replay the saved prompts" "Successful requests:" \
    "$RS" replay --dataset-path "$TMP/saved.jsonl" --scale-factor 1000 -o "$TMP/again.jsonl"
exact=$(jq -s '[.[] | select(.prompt_tokens != null)] | length' "$TMP/again.jsonl")
want=$(jq -s 'length' "$TMP/dry.jsonl")
lengths_ok=$(jq -s -r --slurpfile dry "$TMP/dry.jsonl" \
    '[.[] | {index, prompt_tokens}] as $a | [$dry[] | {index, input_length}] as $d
     | ($a | sort_by(.index) | map(.prompt_tokens)) == ($d | sort_by(.index) | map(.input_length))' \
    "$TMP/again.jsonl")
if [[ "$lengths_ok" == true && "$exact" == "$want" ]]; then
    echo "ok    saved prompts replay at the trace's input lengths ($exact of $want)"
else
    echo "FAIL  saved prompts replay at the trace's input lengths ($exact of $want, equal: $lengths_ok)"
    FAILED=1
fi

# docs/prompts.md: verify-prompts (needs the Qwen3 tokenizer).
Q=.cache/tokenizers/qwen3
if [[ -f "$Q/tokenizer.json" ]]; then
    check "verify-prompts --tokenizer" "re-tokenize to exactly" \
        "$RS" verify-prompts "$DATA/mooncake.jsonl" --tokenizer "$Q"
else
    echo "skip  verify-prompts (no $Q: scripts/fetch-tokenizer.sh)"
fi
exit "$FAILED"
