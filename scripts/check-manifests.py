"""Shard rules of an Indexed request-sim Job that the API schema cannot express."""
import os
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
    check_metrics(path, spec["template"], c)


def check_metrics(path, template, c):
    """--metrics-port: the port Prometheus is told about (container port, annotations, the
    PodMonitor in monitoring/podmonitor.yaml) is the one request-sim listens on, on 0.0.0.0."""
    args = c.get("args", [])
    port = next((a.split("=", 1)[1] for a in args if a.startswith("--metrics-port=")), None)
    if port is None:
        return
    if "--metrics-host=0.0.0.0" not in args:
        fail(path, "--metrics-port without --metrics-host=0.0.0.0: Prometheus could not reach it")
    named = {p.get("name"): p for p in c.get("ports", [])}
    if str(named.get("metrics", {}).get("containerPort")) != port:
        fail(path, f"no container port named metrics with containerPort {port}")
    ann = template.get("metadata", {}).get("annotations", {})
    if ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") != port:
        fail(path, f"annotation prometheus.io/port {ann.get('prometheus.io/port')!r} != {port}")
    pm_path = os.path.join(os.path.dirname(path), "monitoring", "podmonitor.yaml")
    if not os.path.exists(pm_path):
        return
    with open(pm_path) as f:
        pms = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "PodMonitor"]
    labels = template.get("metadata", {}).get("labels", {})
    mine = [
        d
        for d in pms
        if d["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    if len(mine) != 1:
        fail(pm_path, f"expected one PodMonitor selecting the Job's pods {labels}, found {len(mine)}")
    eps = mine[0]["spec"].get("podMetricsEndpoints", [])
    if not eps or any(e.get("port") != "metrics" or e.get("path", "/metrics") != "/metrics" for e in eps):
        fail(pm_path, "the request-sim PodMonitor must scrape port `metrics` at /metrics")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
