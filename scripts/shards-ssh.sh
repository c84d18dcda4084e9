#!/usr/bin/env bash
# Run one trace as N shards on plain hosts over SSH, with a common start, then merge
# (deploy/README.md, "Without Kubernetes").
#
#   HOSTS="h1 h2 h3 h4" ENDPOINT=http://server:8000 TRACE=/data/trace.jsonl scripts/shards-ssh.sh
#
# Environment (defaults in brackets):
#   HOSTS            SSH destinations, one shard each (required)
#   ENDPOINT         server or router under test (required)
#   TRACE            trace path, the same on every host (required)
#   REMOTE_BIN [request-sim]  request-sim on the hosts
#   SEED [1]         prompt seed (identical prompts on every shard)
#   LEAD_SECS [30]   start this many seconds after launch (time for start-up on every host)
#   EXTRA_ARGS []    more replay flags (e.g. "--scale-factor 2 --max-requests 4000")
#   EXPECTED []      --expected-requests for the merge (default: the sum of the shards'
#                    `run.planned`, else the trace's data rows, .gz decompressed)
#   OUT [shards-<UTC time>]  local directory for the records
#   LOCAL_BIN [request-sim]  request-sim on this machine, for the merge
# Every shard is bounded by whatever EXTRA_ARGS bound it with (--time-in-secs, --max-requests).
set -euo pipefail
: "${HOSTS:?set HOSTS}" "${ENDPOINT:?set ENDPOINT}" "${TRACE:?set TRACE}"
REMOTE_BIN="${REMOTE_BIN:-request-sim}"
LOCAL_BIN="${LOCAL_BIN:-request-sim}"
SEED="${SEED:-1}"
LEAD_SECS="${LEAD_SECS:-30}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
OUT="${OUT:-shards-$(date -u +%Y%m%d-%H%M%S)}"
read -r -a hosts <<<"$HOSTS"
n=${#hosts[@]}
start=$(( $(date +%s) + LEAD_SECS ))
mkdir -p "$OUT"
echo "shards-ssh.sh: $n shards, common start at $(date -u -d "@$start" +%FT%TZ) ($start)" >&2

pids=()
for k in "${!hosts[@]}"; do
    h=${hosts[$k]}
    remote_out="/tmp/request-sim-shard-$start-$k.jsonl"
    # shellcheck disable=SC2029 # the command line is meant to expand here
    ssh -o BatchMode=yes "$h" "$REMOTE_BIN replay --endpoint '$ENDPOINT' --dataset-path '$TRACE' \
        --shard $k/$n --seed $SEED --start-at $start --quiet --output-path '$remote_out' $EXTRA_ARGS" \
        >"$OUT/shard-$k.stdout" 2>"$OUT/shard-$k.stderr" &
    pids+=($!)
done
failed=0
for k in "${!pids[@]}"; do
    if ! wait "${pids[$k]}"; then
        echo "shards-ssh.sh: shard $k on ${hosts[$k]} failed (see $OUT/shard-$k.stderr)" >&2
        failed=1
    fi
done
for k in "${!hosts[@]}"; do
    remote_out="/tmp/request-sim-shard-$start-$k.jsonl"
    scp -q -o BatchMode=yes "${hosts[$k]}:$remote_out" "$OUT/shard-$k.jsonl" ||
        echo "shards-ssh.sh: no records from shard $k" >&2
    # The shard's own summary (drift, start offset, host clock); `report DIR` reads only *.jsonl.
    scp -q -o BatchMode=yes "${hosts[$k]}:$remote_out.summary.json" "$OUT/shard-$k.summary.json" ||
        echo "shards-ssh.sh: no summary from shard $k" >&2
done
expected="${EXPECTED:-}"
if [[ -z "$expected" ]] && command -v jq >/dev/null; then
    # Every shard's summary says how many requests its share had (`run.planned`); their sum
    # is the slice (this honours --max-requests/--start-ms/--end-ms in EXTRA_ARGS).
    sum=0
    for k in "${!hosts[@]}"; do
        p=$(jq -r '.run.planned // empty' "$OUT/shard-$k.summary.json" 2>/dev/null || true)
        if [[ -z "$p" ]]; then sum=""; break; fi
        sum=$((sum + p))
    done
    expected="$sum"
fi
if [[ -z "$expected" ]]; then
    # A shard left no summary: count the trace's data rows (non-blank lines; gzip-compressed
    # traces decompressed). Slicing flags in EXTRA_ARGS need EXPECTED instead.
    # shellcheck disable=SC2029
    expected=$(ssh -o BatchMode=yes "${hosts[0]}" \
        "case '$TRACE' in *.gz) gzip -dc '$TRACE' ;; *) cat '$TRACE' ;; esac | grep -c '[^[:space:]]'")
    echo "shards-ssh.sh: expecting $expected requests (the trace's data rows; set EXPECTED when slicing)" >&2
fi
# The merge names missing or duplicated indexes and exits 1 if the union is incomplete.
"$LOCAL_BIN" report "$OUT" --expected-requests "$expected" --result-dir "$OUT/merged"
exit $failed
