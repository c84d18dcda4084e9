#!/usr/bin/env bash
# Builds the request-sim container image with podman (deploy/Dockerfile, FROM scratch, static
# executables, uid 10001) and runs it for real, all in containers on the host network:
#   demo     `replay` with no flags (built-in trace, built-in simulator): must end 200/200 ok;
#   shards   llm-sim in one container, then 2 shards of the Kubernetes Indexed Job
#            (deploy/k8s/job.yaml: its args and environment, JOB_COMPLETION_INDEX set as the Job
#            controller would) against it, then `request-sim report` over both shards' records,
#            which must hold every index of the trace exactly once;
#   startup  launch -> first send, inside a container (podman run included) against the same
#            static binary outside, and the ratio.
#
#   scripts/image.sh              # build, demo, shards, startup
#   scripts/image.sh build        # or any of: build demo shards startup (in that order)
#   NO_BUILD=1 scripts/image.sh   # reuse .cache/static (scripts/build-static.sh)
#
# Environment: IMAGE [localhost/request-sim:<version>], PORT [a free loopback port] for llm-sim,
# LEAD_SECS [10] from now to the shards' common --start-at, RUNS [5] per side for start-up,
# OUT [.cache/image-run]. Podman is run as DESIGN §23 says works here: runc, cgroupfs, host
# networking and a containers.conf with `default_ulimits = []` (written to .cache/podman when
# CONTAINERS_CONF is not set). Prints `image: key=value` lines for scripts/release-check.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
IMAGE=${IMAGE:-localhost/request-sim:$VERSION}
BIN_DIR=${BIN_DIR:-.cache/static}
OUT=${OUT:-.cache/image-run}
LEAD_SECS=${LEAD_SECS:-10}
RUNS=${RUNS:-5}
STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(build demo shards startup)

command -v podman >/dev/null || { echo "image.sh: podman not found (apt-get install -y podman runc)" >&2; exit 2; }
if [[ -z "${CONTAINERS_CONF:-}" ]]; then
  mkdir -p .cache/podman
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' \
    > .cache/podman/containers.conf
  export CONTAINERS_CONF="$ROOT/.cache/podman/containers.conf"
fi
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
mkdir -p "$OUT"
say() { echo "image: $*"; }
now() { date +%s.%N; }

CONTAINERS=()
cleanup() {
  for c in "${CONTAINERS[@]}"; do "${PODMAN[@]}" rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

build() {
  if [[ "${NO_BUILD:-0}" != 1 ]]; then
    OUT="$BIN_DIR" scripts/build-static.sh >/dev/null
  fi
  local ctx="$OUT/context"
  rm -rf "$ctx"
  mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/home/request-sim"
  # The wheel's names (scripts/programs.sh): request-sim-client and request-sim-aiperf, not the
  # bare `client` and `aiperf`.
  # shellcheck source=programs.sh
  . scripts/programs.sh
  local p b
  for p in "${PROGRAMS[@]}"; do
    b=${p#*:}
    [[ -x "$BIN_DIR/$b" ]] || { echo "image.sh: $BIN_DIR/$b missing (run scripts/build-static.sh)" >&2; exit 1; }
    cp "$BIN_DIR/$b" "$ctx/rootfs/usr/local/bin/${p%%:*}"
  done
  chmod 1777 "$ctx/rootfs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nrequest-sim:x:10001:10001:request-sim:/home/request-sim:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
    > "$ctx/rootfs/etc/passwd"
  printf 'root:x:0:\nrequest-sim:x:10001:\nnogroup:x:65534:\n' > "$ctx/rootfs/etc/group"
  local certs=/etc/ssl/certs/ca-certificates.crt
  [[ -s "$certs" ]] || { echo "image.sh: $certs missing (apt-get install ca-certificates)" >&2; exit 1; }
  cp "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
  local t0; t0=$(now)
  "${PODMAN[@]}" build --quiet -f deploy/Dockerfile -t "$IMAGE" "$ctx" >/dev/null
  local bytes; bytes=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
  say "built=$IMAGE size_bytes=$bytes size_mb=$(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1e6}') build_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')"
  # What a registry would hold and a node pull: the layers gzipped (`podman save`, docker-archive).
  local gz; gz=$("${PODMAN[@]}" save --format docker-archive "$IMAGE" 2>/dev/null | gzip -6 | wc -c)
  say "compressed_mb=$(awk -v b="$gz" 'BEGIN{printf "%.1f", b/1e6}') (podman save | gzip -6)"
  # What the image runs as, and that it is not root.
  local user; user=$("${PODMAN[@]}" image inspect --format '{{.Config.User}}' "$IMAGE")
  [[ "$user" == 10001:10001 ]] || { echo "image.sh: image user is '$user', expected 10001:10001" >&2; exit 1; }
  say "user=$user"
}

demo() {
  local dir="$OUT/demo"; rm -rf "$dir"; mkdir -p "$dir"; chmod 777 "$dir"
  local t0; t0=$(now)
  "${PODMAN[@]}" run --rm --network host -v "$ROOT/$dir:/out" "$IMAGE" \
    replay --output-path /out/demo.jsonl --summary-path /out/demo.summary.json \
    >"$dir/stdout.txt" 2>"$dir/stderr.txt" || { cat "$dir/stderr.txt" >&2; echo "image.sh: demo failed" >&2; exit 1; }
  local took; took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')
  local counts; counts=$(python3 scripts/summary-counts.py "$dir/demo.summary.json")
  say "demo=$counts wall_s=$took"
  [[ "$counts" == "200/200 ok" ]] || { echo "image.sh: demo expected 200/200 ok" >&2; exit 1; }
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The args of deploy/k8s/job.yaml's container, one per line, as written (with $(VAR) refs).
manifest_args() {
  awk '/^ *args:/{on=1; next} on && /^ *- /{sub(/^ *- /,""); print; next} on && /^ *#/{next} on{exit}' deploy/k8s/job.yaml
}

shards() {
  local dir="$OUT/shards"; rm -rf "$dir"; mkdir -p "$dir/data/records"
  chmod 777 "$dir/data/records"
  # The trace on the volume: the demo trace (request-sim/data/demo_trace.jsonl), 200 requests.
  cp request-sim/data/demo_trace.jsonl "$dir/data/trace.jsonl"
  local expected; expected=$(grep -c . "$dir/data/trace.jsonl")
  local port=${PORT:-$(free_port)}
  local sim=rs-llm-sim-$$
  "${PODMAN[@]}" run -d --name "$sim" --network host --entrypoint /usr/local/bin/llm-sim "$IMAGE" \
    --host=127.0.0.1 --port="$port" >/dev/null
  CONTAINERS+=("$sim")
  local up=0
  for _ in $(seq 1 100); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then up=1; break; fi
    sleep 0.1
  done
  [[ $up == 1 ]] || { "${PODMAN[@]}" logs "$sim" >&2; echo "image.sh: llm-sim did not come up on $port" >&2; exit 1; }
  # Who it runs as, read by the host from /proc (the image has no `id` to run).
  local pid; pid=$("${PODMAN[@]}" inspect --format '{{.State.Pid}}' "$sim")
  say "llm-sim container process uid=$(awk '/^Uid:/{print $2}' "/proc/$pid/status")"

  # The manifest's environment: N, the index (SHARD_INDEX from the Job's annotation,
  # JOB_COMPLETION_INDEX from the Job controller), START_AT and ENDPOINT (the Service name
  # `llm-sim`, resolved through --add-host as the cluster's DNS would).
  local n=2
  local start_at; start_at=$(date -u -d "+$LEAD_SECS sec" +%Y-%m-%dT%H:%M:%SZ)
  local endpoint="http://llm-sim:$port/v1/chat/completions"
  mapfile -t margs < <(manifest_args)
  [[ ${#margs[@]} -gt 3 ]] || { echo "image.sh: no args found in deploy/k8s/job.yaml" >&2; exit 1; }
  local k names=()
  for ((k = 0; k < n; k++)); do
    local args=() a
    for a in "${margs[@]}"; do
      a=${a//\$(ENDPOINT)/$endpoint}; a=${a//\$(START_AT)/$start_at}; a=${a//\$(SHARD_INDEX)/$k}
      # Host networking: every shard needs its own metrics port (pods each have their own IP).
      case "$a" in
        --metrics-port=*) a="--metrics-port=$((port + 1 + k))" ;;
        --metrics-host=*) a="--metrics-host=127.0.0.1" ;;
        --metrics-linger=*) a="--metrics-linger=0" ;;
      esac
      args+=("$a")
    done
    local name=rs-shard-$k-$$
    "${PODMAN[@]}" run -d --name "$name" --network host --add-host "llm-sim:127.0.0.1" \
      -v "$ROOT/$dir/data:/data" \
      -e REQUEST_SIM_SHARD_COUNT=$n -e JOB_COMPLETION_INDEX=$k -e SHARD_INDEX=$k \
      -e START_AT="$start_at" -e ENDPOINT="$endpoint" \
      "$IMAGE" "${args[@]}" >/dev/null
    CONTAINERS+=("$name"); names+=("$name")
  done
  local rc all=0
  for name in "${names[@]}"; do
    rc=$("${PODMAN[@]}" wait "$name")
    "${PODMAN[@]}" logs "$name" >"$dir/$name.log" 2>&1 || true
    [[ "$rc" == 0 ]] || { cat "$dir/$name.log" >&2; echo "image.sh: $name exited $rc" >&2; all=1; }
  done
  [[ $all == 0 ]] || exit 1
  "${PODMAN[@]}" logs "$sim" >"$dir/llm-sim.log" 2>&1 || true

  # The merge, in a container too: every *.jsonl of the records directory.
  mkdir -p "$dir/merged"; chmod 777 "$dir/merged"
  if ! "${PODMAN[@]}" run --rm --network host -v "$ROOT/$dir/data:/data" -v "$ROOT/$dir/merged:/merged" \
      "$IMAGE" report /data/records --expected-requests "$expected" --result-dir /merged \
      >"$dir/report.txt" 2>&1; then
    cat "$dir/report.txt" >&2; echo "image.sh: report failed" >&2; exit 1
  fi
  # The union check again, independently of request-sim: each index 0..expected-1 exactly once.
  python3 - "$dir/data/records" "$expected" <<'EOF'
import collections, glob, json, sys
d, n = sys.argv[1], int(sys.argv[2])
per_file, seen = {}, collections.Counter()
for p in sorted(glob.glob(d + "/*.jsonl")):
    if p.endswith(".server_metrics.jsonl"):  # the server scrapes beside each shard's records
        continue
    idx = [json.loads(l)["index"] for l in open(p) if l.strip()]
    ok = sum(1 for l in open(p) if l.strip() and json.loads(l).get("status") == "ok")
    per_file[p.rsplit("/", 1)[1]] = (len(idx), ok)
    seen.update(idx)
dups = [i for i, c in seen.items() if c > 1]
missing = [i for i in range(n) if i not in seen]
files = " ".join(f"{f}:{c}({ok}ok)" for f, (c, ok) in per_file.items())
verdict = "every index once" if not dups and not missing and len(seen) == n else f"BAD missing={missing[:5]} dups={dups[:5]}"
print(f"image: shards={len(per_file)} {files} union={len(seen)}/{n} {verdict}")
sys.exit(0 if verdict == "every index once" else 1)
EOF
  say "report: $(grep -m1 '^Union:' "$dir/report.txt" || echo 'no Union line')"
}

# Launch -> first scheduled send (the summary's run.started_at), from outside the process:
# outside = exec of the static binary; inside = `podman run` of the image (container creation
# included). A short demo (--max-requests 10) against the built-in simulator, RUNS times each,
# both with --realtime off: the container has no CAP_SYS_NICE, and as root on the host the
# real-time set-up would make the two sides different programs.
startup() {
  local dir="$OUT/startup"; rm -rf "$dir"; mkdir -p "$dir"; chmod 777 "$dir"
  local i side t0
  for ((i = 0; i < RUNS; i++)); do
    for side in outside inside; do
      t0=$(now)
      if [[ $side == outside ]]; then
        "$BIN_DIR/request-sim" replay --max-requests 10 --realtime off --quiet --output-path "$dir/$side-$i.jsonl" \
          --summary-path "$dir/$side-$i.summary.json" >/dev/null 2>&1
      else
        "${PODMAN[@]}" run --rm --network host -v "$ROOT/$dir:/out" "$IMAGE" replay --max-requests 10 --realtime off --quiet \
          --output-path "/out/$side-$i.jsonl" --summary-path "/out/$side-$i.summary.json" >/dev/null 2>&1
      fi
      echo "$side $t0" >>"$dir/launch.txt"
    done
  done
  python3 - "$dir" <<'EOF'
import datetime, json, statistics, sys
d = sys.argv[1]
launch = {}
counts = {"outside": 0, "inside": 0}
rows = {"outside": [], "inside": []}
for line in open(d + "/launch.txt"):
    side, t0 = line.split()
    i = counts[side]; counts[side] += 1
    s = json.load(open(f"{d}/{side}-{i}.summary.json"))
    run = s["run"]
    started = datetime.datetime.fromisoformat(run["started_at"].replace("Z", "+00:00")).timestamp()
    rows[side].append(((started - float(t0)) * 1e3, run["startup"]["total_ms"]))
med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in rows.items()}
for k, (wall, internal) in med.items():
    print(f"image: startup_{k}_ms={wall:.0f} (in-process start-up {internal:.0f} ms; median of {len(rows[k])})")
print(f"image: startup_ratio={med['inside'][0] / med['outside'][0]:.2f} (launch->first send, container/host)")
EOF
}

for step in "${STEPS[@]}"; do
  case "$step" in
    build|demo|shards|startup) "$step" ;;
    *) echo "image.sh: unknown step $step (build demo shards startup)" >&2; exit 2 ;;
  esac
done
