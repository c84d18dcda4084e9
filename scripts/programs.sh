# The programs the wheel (scripts/wheel.sh) and the image (scripts/image.sh) ship, as
# `INSTALLED_NAME:CARGO_BIN`, and the Cargo binaries scripts/build-static.sh builds for them.
# Sourced, not run.
#
# The drop-ins whose Cargo names are other projects' commands go on PATH under prefixed names:
# a bare `client` on a user's PATH would answer for any other project's `client`, and pip would
# overwrite AIPerf's own `aiperf` in a venv that holds both (and delete it on uninstall). Whoever
# wants the old name asks for it: `ln -s "$(command -v request-sim-client)" ~/bin/client`
# (docs/install.md, "Drop-ins under their old names"). trace_replay keeps its name: UCM's is a
# Python script (`benchmarks/trace_replay.py`), not a command on PATH.
# shellcheck disable=SC2034
PROGRAMS=(
  request-sim:request-sim
  llm-sim:llm-sim
  trace_replay:trace_replay
  request-sim-client:client
  request-sim-aiperf:aiperf
)
# The Cargo binary names alone, in the same order.
CARGO_BINS=("${PROGRAMS[@]#*:}")
