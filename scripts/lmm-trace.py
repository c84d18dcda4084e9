#!/usr/bin/env python3
"""Write an Azure-LMM-shaped CSV trace (docs/images.md) for image checks.

    scripts/lmm-trace.py OUT.csv [--requests 200] [--rate 4] [--seed 1] [--reuse 0.3]

Columns: TIMESTAMP, NumImages (1-4), ContextTokens (300-8,000, and at least room for the
images at 448x448: 258 tokens each, plus 64), GeneratedTokens (2-16), and request-sim's
ImageIds: a share `--reuse` of the rows repeat the image ids of a row at least 20 rows
earlier (the same images: a prefix-cache hit), the others have new ids. Arrivals are
`--rate` per second, evenly spaced.
"""
import argparse
import datetime
import random

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--requests", type=int, default=200)
p.add_argument("--rate", type=float, default=4.0)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--reuse", type=float, default=0.3)
a = p.parse_args()
rng = random.Random(a.seed)
start = datetime.datetime(2025, 5, 12, 0, 0, 0)
rows, next_id = [], 1
for i in range(a.requests):
    if i >= 20 and rng.random() < a.reuse:
        ids = rows[rng.randrange(0, i - 19)][1]
    else:
        n = rng.randint(1, 4)
        ids = list(range(next_id, next_id + n))
        next_id += n
    ctx = max(rng.randint(300, 8000), len(ids) * 258 + 64)
    rows.append((ctx, ids, rng.randint(2, 16)))
with open(a.out, "w") as f:
    f.write("TIMESTAMP,NumImages,ContextTokens,GeneratedTokens,ImageIds\n")
    for i, (ctx, ids, gen) in enumerate(rows):
        t = start + datetime.timedelta(seconds=i / a.rate)
        f.write(f"{t:%Y-%m-%d %H:%M:%S.%f},{len(ids)},{ctx},{gen},{' '.join(map(str, ids))}\n")
