#!/usr/bin/env bash
# Build the tiny random-weight Qwen2.5-VL that scripts/vllm.sh's `vl` mode serves
# (../shared/DESIGN.md §22). Called by scripts/vllm-install.sh; idempotent.
#
#   scripts/vllm-vl-model.sh        # VLLM_CACHE (default .cache/vllm) must hold the venv and
#                                   # the tiny Qwen3 (its tokenizer files are reused)
#
# The model: transformers' Qwen2_5_VLForConditionalGeneration from a small config (2 text
# layers, hidden 128; vision depth 2, hidden 64, patch 14, spatial merge 2, so one image token
# per 28×28 pixels), the Qwen3 tokenizer (whose vision ids are <|vision_start|> 151652,
# <|vision_end|> 151653, <|image_pad|> 151655), Qwen2.5-VL's chat template and image-processor
# values (min_pixels 3136, max_pixels 12845056) written here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VLLM_CACHE:-$ROOT/.cache/vllm}"
VENV="$CACHE/venv"
TEXT_MODEL="$CACHE/qwen3-tiny-random"
MODEL="$CACHE/qwen25vl-tiny-random"

log() { echo "vllm-vl-model.sh: $(date +%T) $*" >&2; }

if [[ -f "$MODEL/config.json" && -f "$MODEL/preprocessor_config.json" ]]; then
    log "tiny Qwen2.5-VL already built: $MODEL"
    exit 0
fi
[[ -f "$TEXT_MODEL/tokenizer.json" ]] || { log "no tokenizer in $TEXT_MODEL (run scripts/vllm-install.sh)"; exit 1; }
log "building a random-weight tiny Qwen2.5-VL at $MODEL"
"$VENV/bin/python" - "$MODEL" "$TEXT_MODEL" <<'EOF'
import json, os, shutil, sys
import torch
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
out, tok = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
text = dict(
    vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                     "mrope_section": [4, 6, 6]},
    bos_token_id=151643, eos_token_id=151645,
)
vision = dict(
    depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=14,
    spatial_merge_size=2, temporal_patch_size=2, window_size=112, out_hidden_size=128,
    fullatt_block_indexes=[1],
)
cfg = Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                       image_token_id=151655, video_token_id=151656,
                       vision_start_token_id=151652, vision_end_token_id=151653)
model = Qwen2_5_VLForConditionalGeneration(cfg).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
for name in os.listdir(tok):
    if name.startswith("tokenizer") or name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(tok, name), out)
# Qwen2.5-VL's chat template: a default system turn, one vision block per image part.
template = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
cfg_path = os.path.join(out, "tokenizer_config.json")
tc = json.load(open(cfg_path))
tc["chat_template"] = template
json.dump(tc, open(cfg_path, "w"), indent=1)
json.dump({"chat_template": template}, open(os.path.join(out, "chat_template.json"), "w"))
json.dump({
    "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
}, open(os.path.join(out, "preprocessor_config.json"), "w"), indent=1)
print("model params", sum(p.numel() for p in model.parameters()))
EOF
log "done: $MODEL"
