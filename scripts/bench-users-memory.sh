#!/usr/bin/env bash
# Peak memory of a population against its size (issue #55 item 3): `replay --users N
# --max-idle-gap 1 -t 5 --dry-run` on a Weka / kv-cache-tester corpus, for each N of USERS.
# Memory must follow what the run can send before its time limit, not users x conversation
# length.
#
#   CORPUS=<dir of Weka *.json> scripts/bench-users-memory.sh
#
# Without CORPUS a corpus like kv-cache-tester's is generated (CONVS conversations of REQS
# requests, each prompt its predecessor's plus 2 blocks of 64 tokens, starting at PROMPT_BLOCKS
# blocks, gaps of 1-20 s). The public corpus itself: `git clone
# https://github.com/callanjfox/kv-cache-tester` (traces/, 710 files, 440 MB).
#
# Prints one row per N: requests laid out, requests left out past the limit, peak RSS (MB),
# wall time (s). A dry run opens no connection; each run is capped by `timeout`.
#
# Environment (defaults in brackets):
#   CORPUS []  USERS ["1000 10000 100000"]  TIME_S [5]  CONVS [200]  REQS [60]
#   PROMPT_BLOCKS [500]  BIN_DIR [target/release]  NO_BUILD [0]
#   OUT [bench-results/users-memory-<UTC time>]
# Needs: jq, python3, GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=${USERS:-"1000 10000 100000"}
TIME_S=${TIME_S:-5}
CONVS=${CONVS:-200}
REQS=${REQS:-60}
PROMPT_BLOCKS=${PROMPT_BLOCKS:-500}
BIN_DIR=${BIN_DIR:-target/release}
OUT=${OUT:-bench-results/users-memory-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release -p request-sim --bin request-sim
fi
RS="$BIN_DIR/request-sim"
if [[ -z "${CORPUS:-}" ]]; then
    CORPUS="$OUT/corpus"
    mkdir -p "$CORPUS"
    python3 - "$CORPUS" "$CONVS" "$REQS" "$PROMPT_BLOCKS" <<'PY'
import json, os, random, sys
out, convs, reqs, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(7)
for c in range(convs):
    ids = [c * 10_000_000 + k for k in range(first)]
    t, entries = 0.0, []
    for k in range(reqs):
        ids = ids + [c * 10_000_000 + first + 2 * k, c * 10_000_000 + first + 2 * k + 1]
        api = round(rng.uniform(0.5, 4.0), 2)
        think = round(rng.uniform(1.0, 20.0), 2) if k > 0 else 0.0
        t += think
        entries.append({"t": round(t, 2), "type": "s", "in": 64 * len(ids), "out": 200,
                        "hash_ids": ids, "api_time": api, "think_time": think})
        t += api
    with open(os.path.join(out, f"{c:06d}.json"), "w") as f:
        json.dump({"id": f"c{c}", "block_size": 64, "requests": entries}, f)
PY
fi
printf '%-8s %10s %12s %12s %8s\n' users laid_out past_limit peak_rss_MB wall_s
for n in $USERS; do
    rec="$OUT/users-$n.jsonl"
    /usr/bin/time -f "%M %e" -o "$OUT/users-$n.time" timeout 600 "$RS" replay \
        --dataset-path "$CORPUS" --users "$n" --max-idle-gap 1 -t "$TIME_S" --dry-run \
        --quiet -o "$rec" --overwrite >"$OUT/users-$n.out" 2>"$OUT/users-$n.err" || {
        echo "bench-users-memory.sh: --users $n failed (see $OUT/users-$n.err)" >&2
        continue
    }
    read -r rss wall <"$OUT/users-$n.time"
    printf '%-8s %10s %12s %12.1f %8s\n' "$n" \
        "$(jq -r '.agents.layout.requests' "$rec.summary.json")" \
        "$(jq -r '.agents.layout.past_limit // 0' "$rec.summary.json")" \
        "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$wall"
done
