#!/usr/bin/env bash
# Builds request-sim, llm-sim and the drop-ins client, trace_replay and aiperf as static x86_64
# Linux executables (glibc linked in with `-C target-feature=+crt-static`, release profile) and
# copies them, stripped, into OUT (default .cache/static) under their Cargo names. Both the wheel
# (scripts/wheel.sh) and the image (scripts/image.sh) ship these five files, `client` and
# `aiperf` under the names request-sim-client and request-sim-aiperf (the list and why:
# scripts/programs.sh); docs/install.md says why static.
#
#   scripts/build-static.sh            # then: ls .cache/static
#   CARGO_TARGET_DIR=/elsewhere OUT=/tmp/bins scripts/build-static.sh
#
# `--target` is given explicitly so RUSTFLAGS reach only the target artifacts, not the build
# scripts and proc macros (which must stay dynamic). Takes 5-15 minutes from cold.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${TARGET:-x86_64-unknown-linux-gnu}
OUT=${OUT:-.cache/static}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
# shellcheck source=programs.sh
. scripts/programs.sh
BINS=("${CARGO_BINS[@]}")

RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  nice -n "${NICE:-10}" cargo build --release --locked --target "$TARGET" \
  -p request-sim -p llm-sim "${BINS[@]/#/--bin=}" >&2

mkdir -p "$OUT"
for b in "${BINS[@]}"; do
  src="$TARGET_DIR/$TARGET/release/$b"
  # A static executable has no interpreter (PT_INTERP) and no NEEDED libraries.
  if readelf -l "$src" | grep -q 'Requesting program interpreter' || readelf -d "$src" | grep -q NEEDED; then
    echo "build-static: $src is dynamically linked" >&2
    exit 1
  fi
  strip -o "$OUT/$b.tmp" "$src"
  mv "$OUT/$b.tmp" "$OUT/$b"
done
echo "$OUT"
