#!/usr/bin/env python3
"""The image check of scripts/vllm.sh vl (docs/images.md): records against their trace.

    scripts/vl-check.py RECORDS TRACE.csv HEAD_TOKENS BLOCK_SIZE

Prints one tab-separated row: records/rows, ok, prompt_tokens = ContextTokens, image tokens
exact, text exact, rows repeating earlier image ids (and of those sent after the earlier
request ended), client cached tokens on them, the ideal, cached tokens on the other rows.

The ideal for a repeat sent after its earlier request ended: the template's head (HEAD_TOKENS,
before the first image) plus the repeated images (N + 2 each), in whole blocks, at most the
prompt less its last token (vLLM always computes the last token).
"""
import csv
import json
import sys

if sys.argv[1] == "--head":
    # scripts/vl-check.py --head URL: the template's tokens before the first image, from the
    # server's /tokenize (run with the vLLM venv's python: it needs PIL).
    import base64, io, urllib.request
    from PIL import Image
    b = io.BytesIO()
    Image.new("RGB", (56, 56)).save(b, "PNG")
    url = "data:image/png;base64," + base64.b64encode(b.getvalue()).decode()
    m = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                      {"type": "text", "text": "x"}]}]
    req = urllib.request.Request(sys.argv[2] + "/tokenize", json.dumps({"messages": m}).encode(),
                                 {"content-type": "application/json"})
    print(json.load(urllib.request.urlopen(req))["tokens"].index(151652))
    sys.exit(0)

records_path, trace_path, head, block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
recs = sorted((json.loads(l) for l in open(records_path) if l.strip()), key=lambda r: r["index"])
rows = list(csv.DictReader(open(trace_path)))
ok = sum(r["status"] == "ok" for r in recs)
exact = sum(r.get("prompt_tokens") == int(rows[r["index"]]["ContextTokens"]) for r in recs)
img_exact = sum(r.get("image_tokens") is not None and r.get("image_tokens") == r.get("image_tokens_intended") for r in recs)
text_exact = sum(
    r.get("prompt_tokens") is not None and r.get("image_tokens") is not None
    and r["prompt_tokens"] - r["image_tokens"] == r["input_length"] - r["image_tokens_intended"]
    for r in recs)
end = {r["index"]: r["sent_ms"] + (r.get("e2e_ms") or r.get("done_ms") or 0) for r in recs if r.get("sent_ms") is not None}
first_seen = {}
repeats = after_end = cached_rep = ideal = cached_other = 0
for r in recs:
    ids = rows[r["index"]]["ImageIds"].strip()
    c = r.get("cached_tokens") or 0
    if ids in first_seen:
        repeats += 1
        e = first_seen[ids]
        if r.get("sent_ms") is not None and end.get(e, float("inf")) <= r["sent_ms"]:
            after_end += 1
            n = r["image_tokens_intended"] + 2 * r["images"]
            prompt = r["prompt_tokens"]
            ideal += min((head + n) // block, (prompt - 1) // block) * block
            cached_rep += c
        else:
            cached_other += c
    else:
        first_seen[ids] = r["index"]
        cached_other += c
print("\t".join(str(x) for x in [
    f"{len(recs)}/{len(rows)}", ok, f"{exact}/{len(recs)}", f"{img_exact}/{len(recs)}",
    f"{text_exact}/{len(recs)}", f"{repeats} ({after_end} after the first ended)",
    cached_rep, ideal, cached_other]))
