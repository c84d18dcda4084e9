"""Shard rules of an Indexed request-sim Job that the API schema cannot express."""
import sys

import yaml


def fail(path, msg):
    print(f"{path}: {msg}", file=sys.stderr)
    sys.exit(1)


def main(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    jobs = [d for d in docs if d.get("kind") == "Job"]
    if len(jobs) != 1:
        fail(path, f"expected one Job, found {len(jobs)}")
    spec = jobs[0]["spec"]
    if spec.get("completionMode") != "Indexed":
        fail(path, "spec.completionMode must be Indexed (JOB_COMPLETION_INDEX is the shard)")
    n = spec.get("completions")
    if spec.get("parallelism") != n:
        fail(path, f"parallelism {spec.get('parallelism')} != completions {n}: all shards must run at once")
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") != "Never":
        fail(path, "restartPolicy must be Never: a restarted shard would start after the common start")
    (c,) = [c for c in pod["containers"] if c["name"] == "request-sim"]
    env = {e["name"]: e for e in c.get("env", [])}
    count = env.get("REQUEST_SIM_SHARD_COUNT", {}).get("value")
    if count != str(n):
        fail(path, f"REQUEST_SIM_SHARD_COUNT {count!r} != completions {n}")
    args = c.get("args", [])
    for flag in ("--start-at=", "--seed=", "--output-path="):
        if not any(a.startswith(flag) for a in args):
            fail(path, f"request-sim args lack {flag[:-1]}")
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"] for v in pod.get("volumes", [])}
    if not mounts <= vols:
        fail(path, f"volumeMounts {sorted(mounts - vols)} name no volume")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
