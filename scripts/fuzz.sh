#!/usr/bin/env bash
# Short fuzz run of every cargo-fuzz target (not part of CI's test command).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 30 s, all targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). On a stable toolchain RUSTC_BOOTSTRAP=1 lets
# cargo-fuzz use the nightly-only sanitizer flags; set FUZZ_SANITIZER=none if the address
# sanitizer is unavailable. Crashes land in fuzz/artifacts/TARGET/; the corpus in fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-30}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(trace_parse sse_response agent_trace)
fi
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1

for t in "${targets[@]}"; do
    echo "== fuzz target $t for ${secs}s (sanitizer: $sanitizer)"
    mkdir -p "fuzz/corpus/$t"
    seeds=()
    if [ -d "fuzz/seeds/$t" ]; then
        seeds+=("fuzz/seeds/$t")
    fi
    if [ "$t" = trace_parse ]; then
        seeds+=(request-sim/tests/data/traces)
    fi
    cargo fuzz run --fuzz-dir fuzz --sanitizer "$sanitizer" "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
