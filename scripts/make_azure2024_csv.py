#!/usr/bin/env python3
"""Write a week-long CSV in the Azure LLM inference trace 2024 format (`TIMESTAMP,ContextTokens,
GeneratedTokens`, timestamps `2024-05-10 00:00:00.009930+00:00`) with --rows rows, for measuring
how `request-sim analyze` and `replay --dry-run` stream the real week-long files (millions of
rows). Arrivals are Poisson at a rate that follows a daily cycle, lengths are log-normal (the
shape of the published traces, not their values). Seeded.

    scripts/make_azure2024_csv.py --rows 5000000 -o azure2024_week.csv
"""

import argparse
import math
import random
from datetime import datetime, timedelta, timezone


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    span = args.days * 86400.0
    mean_rate = args.rows / span
    start = datetime(2024, 5, 10, tzinfo=timezone.utc)
    t = 0.0
    with open(args.output, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for _ in range(args.rows):
            # A daily cycle between 0.4x and 1.6x the mean rate.
            rate = mean_rate * (1.0 + 0.6 * math.sin(2 * math.pi * t / 86400.0))
            t += rng.expovariate(rate)
            ctx = max(1, int(rng.lognormvariate(7.0, 1.1)))
            gen = max(1, int(rng.lognormvariate(4.5, 1.0)))
            ts = (start + timedelta(seconds=t)).isoformat(sep=" ", timespec="microseconds")
            f.write(f"{ts},{ctx},{gen}\n")


if __name__ == "__main__":
    main()
