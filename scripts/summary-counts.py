#!/usr/bin/env python3
"""Prints a replay summary's verdict as `<ok>/<planned> ok` (planned: the requests the run meant
to send; the records' total when the summary has no plan). Used by scripts/image.sh and
scripts/release-check.sh.

    scripts/summary-counts.py results/replay-20261127-223000.summary.json
"""
import json
import sys

s = json.load(open(sys.argv[1]))
status = s.get("status") or {}
planned = (s.get("run") or {}).get("planned") or status.get("total")
print(f"{status.get('ok')}/{planned} ok")
