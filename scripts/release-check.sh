#!/usr/bin/env bash
# Before a release (by hand, not CI: it needs podman, PyPI and 5-20 minutes): builds the static
# executables once, then checks both ways users install request-sim and prints the numbers.
#
#   scripts/release-check.sh             # wheel + image
#   scripts/release-check.sh wheel       # or only one of them
#   NO_BUILD=1 scripts/release-check.sh  # reuse .cache/static
#
# Wheel (scripts/wheel.sh): its size and `auditwheel show` (is the platform tag honest?); a fresh
# venv, `pip install dist/*.whl`, and `request-sim replay` (the README's demo), both under
# `env -i PATH=<venv>/bin:/usr/bin:/bin` so no cargo, rustc or ~/.cargo is reachable: must end
# 200/200 ok. Prints the time from `pip install` to the demo's end.
# Image (scripts/image.sh): size, the demo in a container, 2 Indexed-Job shards against a
# containerised llm-sim merged by `report`, start-up ratio; then scripts/check-manifests.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WHAT=("$@")
[[ ${#WHAT[@]} -gt 0 ]] || WHAT=(wheel image)
OUT=${OUT:-.cache/release-check}
mkdir -p "$OUT"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  t0=$(now)
  scripts/build-static.sh >/dev/null
  echo "release-check: static build $(secs "$t0" "$(now)") s"
fi
ls -l .cache/static | awk 'NR>1{printf "release-check: binary %s %.1f MB\n", $9, $5/1e6}'

wheel() {
  local whl
  whl=$(NO_BUILD=1 CHECK=1 scripts/wheel.sh 2>"$OUT/auditwheel.txt")
  echo "release-check: wheel $whl $(stat -c %s "$whl" | awk '{printf "%.1f MB", $1/1e6}')"
  sed 's/^/release-check:   auditwheel: /' "$OUT/auditwheel.txt" | grep -v '^release-check:   auditwheel: *$' | head -8
  local venv="$OUT/venv" res="$OUT/wheel-demo"
  rm -rf "$venv" "$res"; mkdir -p "$res"
  python3 -m venv "$venv"
  # The demo's machine has Python and nothing of Rust: a minimal environment, no ~/.cargo/bin.
  local clean=(env -i "PATH=$ROOT/$venv/bin:/usr/bin:/bin" "HOME=$HOME" "LANG=C.UTF-8")
  if "${clean[@]}" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
    echo "release-check: cargo/rustc still reachable on the clean PATH" >&2; exit 1
  fi
  echo "release-check: clean PATH: $("${clean[@]}" sh -c 'which cargo rustc; echo "which cargo rustc -> exit $?"' 2>&1 | tail -1)"
  local t0 t1
  t0=$(now)
  "${clean[@]}" "$venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$ROOT/$whl"
  t1=$(now)
  (cd "$res" && "${clean[@]}" request-sim replay >stdout.txt 2>stderr.txt) ||
    { cat "$res/stderr.txt" >&2; echo "release-check: wheel demo failed" >&2; exit 1; }
  local t2; t2=$(now)
  local which_rs; which_rs=$("${clean[@]}" sh -c 'for b in request-sim llm-sim trace_replay request-sim-client request-sim-aiperf; do command -v "$b" || echo "$b:missing"; done' | tr '\n' ' ')
  local summary; summary=$(ls "$res"/results/*.summary.json 2>/dev/null | head -1)
  [[ -n "$summary" ]] || summary=$(ls "$res"/results/*/summary.json 2>/dev/null | head -1)
  local counts; counts=$(python3 scripts/summary-counts.py "$summary")
  echo "release-check: on PATH: $which_rs"
  # The drop-ins' bare names stay off PATH unless a user links them (scripts/programs.sh).
  for b in client aiperf; do
    [[ ! -e "$venv/bin/$b" ]] || { echo "release-check: the wheel installed a bare $b" >&2; exit 1; }
  done
  echo "release-check: wheel demo $counts; pip install $(secs "$t0" "$t1") s, pip install -> demo end $(secs "$t0" "$t2") s"
  [[ "$counts" == "200/200 ok" ]] || { echo "release-check: expected 200/200 ok" >&2; exit 1; }
}

image() {
  NO_BUILD=1 scripts/image.sh build demo shards startup | sed 's/^image: /release-check: image /'
  scripts/check-manifests.sh | sed 's/^/release-check: /'
}

for w in "${WHAT[@]}"; do
  case "$w" in
    wheel|image) "$w" ;;
    *) echo "release-check: unknown part $w (wheel image)" >&2; exit 2 ;;
  esac
done
echo "release-check: done"
