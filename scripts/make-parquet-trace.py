#!/usr/bin/env python3
"""Write a JSONL trace (Mooncake or generic rows) as a Parquet trace, with pyarrow.

    python3 scripts/make-parquet-trace.py IN.jsonl OUT.parquet [--schema baseten|mooncake]
        [--block-size N] [--epoch-ms MS] [--row-group ROWS] [--compression snappy|zstd|gzip|none]
        [--prompt-every K] [--max-rows N]

- baseten: Baseten's export columns, as AIPerf's `baseten_trace` loader reads them:
  timestamp_start_unix_ms (--epoch-ms + the row's ms), input_tokens, output_tokens,
  total_hashes, block_size, provided_session_id (the row's session_id, else null),
  prompt (a literal text on every K-th row without hash ids, else null), model_name,
  duration_e2e_ms, request_canceled, output_text (not read by request-sim).
- mooncake: the Mooncake columns timestamp, input_length, output_length, hash_ids, session_id.

Used for request-sim's test fixtures (tests/data/traces/*.parquet) and the real-vLLM check of
a Baseten-shaped trace (docs/traces.md, "Parquet"). Needs pyarrow (`pip install pyarrow`).
"""
import argparse
import json

import pyarrow as pa
import pyarrow.parquet as pq


def rows(path, limit):
    with open(path) as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                return
            if line.strip():
                yield json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--schema", choices=["baseten", "mooncake"], default="baseten")
    ap.add_argument("--block-size", type=int, default=512)
    ap.add_argument("--epoch-ms", type=int, default=1_760_000_000_000)
    ap.add_argument("--row-group", type=int, default=None)
    ap.add_argument("--compression", default="snappy")
    ap.add_argument("--prompt-every", type=int, default=0,
                    help="give every K-th row no hash ids and a literal prompt (0: never)")
    ap.add_argument("--max-rows", type=int, default=None)
    a = ap.parse_args()
    src = list(rows(a.src, a.max_rows))
    if a.schema == "mooncake":
        table = pa.table({
            "timestamp": pa.array([r["timestamp"] for r in src], pa.float64()),
            "input_length": pa.array([r["input_length"] for r in src], pa.int64()),
            "output_length": pa.array([r["output_length"] for r in src], pa.int64()),
            "hash_ids": pa.array([r.get("hash_ids") for r in src], pa.list_(pa.int64())),
            "session_id": pa.array([r.get("session_id") for r in src], pa.string()),
        })
    else:
        literal = [a.prompt_every > 0 and i % a.prompt_every == a.prompt_every - 1
                   for i in range(len(src))]
        table = pa.table({
            "timestamp_start_unix_ms": pa.array(
                [a.epoch_ms + int(round(r["timestamp"])) for r in src], pa.int64()),
            "prompt": pa.array(
                [" ".join(["hello"] * r["input_length"]) if lit else None
                 for r, lit in zip(src, literal)], pa.string()),
            "input_tokens": pa.array([r["input_length"] for r in src], pa.int64()),
            "output_tokens": pa.array([r["output_length"] for r in src], pa.int64()),
            "total_hashes": pa.array(
                [[] if lit else r.get("hash_ids", []) for r, lit in zip(src, literal)],
                pa.list_(pa.int64())),
            "block_size": pa.array([a.block_size] * len(src), pa.int64()),
            "provided_session_id": pa.array(
                [None if r.get("session_id") is None else str(r["session_id"]) for r in src],
                pa.string()),
            "model_name": pa.array(["baseten-model"] * len(src), pa.string()),
            "duration_e2e_ms": pa.array([1000] * len(src), pa.int64()),
            "request_canceled": pa.array([0] * len(src), pa.int64()),
            "output_text": pa.array(["x" * 40] * len(src), pa.string()),
        })
    pq.write_table(table, a.out, row_group_size=a.row_group,
                   compression=None if a.compression == "none" else a.compression)
    print(f"{a.out}: {len(src)} rows, schema {a.schema}, "
          f"{pq.ParquetFile(a.out).metadata.num_row_groups} row groups, {a.compression}")


if __name__ == "__main__":
    main()
