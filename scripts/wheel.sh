#!/usr/bin/env bash
# Builds dist/request_sim-<version>-py3-none-<platform>.whl: the five executables of
# scripts/build-static.sh in the wheel's `.data/scripts/`, so `pip install` puts them on the
# venv's PATH as request-sim, llm-sim, trace_replay, request-sim-client and request-sim-aiperf
# (the names and why the drop-ins are prefixed: scripts/programs.sh). No Rust is needed to
# install or run it. docs/install.md: why a small wheel writer and not maturin, and how a release
# builds the other platforms.
#
#   scripts/wheel.sh                 # builds the binaries, then the wheel; prints its path
#   NO_BUILD=1 scripts/wheel.sh      # reuse .cache/static
#   CHECK=1 scripts/wheel.sh         # also `auditwheel show` the result (auditwheel from PyPI,
#                                    # installed once into .cache/wheel-tools)
#
# The platform tag is what the binaries need: static, they load no shared library, so any
# x86_64 Linux with glibc >= 2.17 qualifies; manylinux2014 is that tag's older spelling, which
# pip < 20.3 needs. The wheel writer checks that claim before it writes the tag: an executable
# with an ELF interpreter or NEEDED libraries (NO_BUILD=1 BIN_DIR=<a dynamic build>) is refused
# by name, and no wheel is written (exit 1). TARGET=aarch64-unknown-linux-gnu (binaries built
# for it) gives the aarch64 tag; TAG overrides (docs/install.md, "Publishing").
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.cache/static}
OUT=${OUT:-dist}
VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
TARGET=${TARGET:-x86_64-unknown-linux-gnu}
ARCH=${TARGET%%-*}
TAG=${TAG:-manylinux_2_17_$ARCH.manylinux2014_$ARCH}

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  TARGET="$TARGET" OUT="$BIN_DIR" scripts/build-static.sh >/dev/null
fi
# shellcheck source=programs.sh
. scripts/programs.sh
SHIP=()
for p in "${PROGRAMS[@]}"; do
  b=${p#*:}
  [[ -x "$BIN_DIR/$b" ]] || { echo "wheel.sh: $BIN_DIR/$b missing (run scripts/build-static.sh)" >&2; exit 1; }
  SHIP+=("${p%%:*}=$BIN_DIR/$b")
done
rm -f "$OUT"/request_sim-"$VERSION"-*.whl
WHEEL=$(SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)} \
  python3 scripts/write-wheel.py --version "$VERSION" --tag "$TAG" --out "$OUT" \
  "${SHIP[@]}")

if [[ "${CHECK:-0}" == 1 ]]; then
  TOOLS=.cache/wheel-tools
  if [[ ! -x "$TOOLS/bin/auditwheel" ]]; then
    python3 -m venv "$TOOLS" >&2
    "$TOOLS/bin/pip" install --quiet --disable-pip-version-check auditwheel >&2
  fi
  report=$("$TOOLS/bin/auditwheel" show "$WHEEL" 2>&1) || { echo "$report" >&2; exit 1; }
  echo "$report" >&2
  # The claim must not be wider than what auditwheel finds: glibc 2.Y with Y <= the tag's.
  found=$(echo "$report" | tr '\n' ' ' | grep -o '"manylinux_2_[0-9]*_[a-z0-9_]*"' | head -1 | tr -d '"')
  claimed=$(echo "$TAG" | grep -o 'manylinux_2_[0-9]*' | head -1)
  if [[ -n "$found" && -n "$claimed" ]]; then
    fy=$(echo "$found" | cut -d_ -f3); cy=$(echo "$claimed" | cut -d_ -f3)
    if (( fy > cy )); then
      echo "wheel.sh: tagged $claimed but auditwheel finds $found: the tag is not honest" >&2
      exit 1
    fi
  fi
fi
echo "$WHEEL"
