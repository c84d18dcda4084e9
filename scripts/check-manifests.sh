#!/usr/bin/env bash
# Checks the Kubernetes manifests of deploy/k8s against the Kubernetes API schemas
# (kubernetes-validate from PyPI, strict: unknown fields are errors) and the shard rules of
# deploy/README.md (Indexed Job, completions = parallelism = REQUEST_SIM_SHARD_COUNT).
# No cluster needed. The validator is installed once into .cache/kubernetes-validate; exit 2
# when it cannot be installed, 1 when a manifest is invalid.
set -euo pipefail
cd "$(dirname "$0")/.."
KV_VERSION=1.37.0
VENV=.cache/kubernetes-validate
if [[ ! -x "$VENV/bin/kubernetes-validate" ]] || ! "$VENV/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KV_VERSION"; then
  if ! { python3 -m venv "$VENV" &&
         "$VENV/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VERSION"; }; then
    echo "check-manifests: could not install kubernetes-validate $KV_VERSION into $VENV" >&2
    exit 2
  fi
fi
"$VENV/bin/kubernetes-validate" --strict --quiet deploy/k8s/*.yaml
"$VENV/bin/python" scripts/check-manifests.py deploy/k8s/job.yaml
echo "check-manifests: deploy/k8s/*.yaml valid"
