#!/usr/bin/env bash
# tootsie MoE vs Levanter's qwen3_moe, and tootsie dense at equal active parameters, on CPU in interleaved rounds.
#
#   LEVANTER_PYTHON=/tmp/lev/bin/python benchmarks/moe_pairs.sh 3 > moe_pairs.log
#
# Per round, each line with the load average: bench_moe.py train --model moe8, Levanter's train_lm on the same shape
# (levanter_peer.py setup --model moe in a fresh directory, then levanter_peer.py run), bench_moe.py train --model
# dense. Every run: one compiling step then STEPS timed ones; CPU s/step is measured inside the run on both sides.
# Levanter is installed in its own venv: python3 -m venv /tmp/lev && /tmp/lev/bin/pip install marin-levanter gitpython
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${STEPS:-6}
BATCH=${BATCH:-4}
LEVANTER_PYTHON=${LEVANTER_PYTHON:-/tmp/lev/bin/python}
PYTHON=${PYTHON:-.venv/bin/python}
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$PYTHON" benchmarks/bench_moe.py train --model moe8 --steps "$STEPS" --batch-size "$BATCH" 2>/dev/null \
    | tail -1 | sed "s/^/tootsie-moe $round /"
  run=$(mktemp -d /tmp/levbench-XXXX)  # fresh: Levanter would reuse an earlier run's token cache
  "$PYTHON" benchmarks/levanter_peer.py setup --dir "$run" --steps "$STEPS" --batch-size "$BATCH" --model moe > /dev/null
  echo "levanter-moe $round load=$(cut -d' ' -f1 /proc/loadavg)" \
    "$("$PYTHON" benchmarks/levanter_peer.py run --dir "$run" --python "$LEVANTER_PYTHON")"
  rm -rf "$run"
  "$PYTHON" benchmarks/bench_moe.py train --model dense --steps "$STEPS" --batch-size "$BATCH" 2>/dev/null \
    | tail -1 | sed "s/^/tootsie-dense $round /"
done
echo "== done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
