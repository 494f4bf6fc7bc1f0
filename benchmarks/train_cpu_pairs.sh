#!/usr/bin/env bash
# tootsie vs Levanter train_lm on the issue-5 CPU shape: back-to-back pairs, each Levanter run in a fresh directory.
#
#   LEVANTER_PYTHON=/tmp/lev/bin/python benchmarks/train_cpu_pairs.sh 3 > pairs.log
#
# Per pair: bench_train_cpu.py (a 10- and a 30-step run in one process: wall tokens/s, CPU s/step, peak RSS), then
# Levanter 30 steps and Levanter 10 steps (user+sys CPU seconds from `time -v`; CPU s/step = their difference / 20).
# Levanter is installed in its own venv: python3 -m venv /tmp/lev && /tmp/lev/bin/pip install marin-levanter gitpython
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-3}
LEVANTER_PYTHON=${LEVANTER_PYTHON:-/tmp/lev/bin/python}
PYTHON=${PYTHON:-.venv/bin/python}
for pair in $(seq 1 "$PAIRS"); do
  echo "== pair $pair $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  "$PYTHON" benchmarks/bench_train_cpu.py --steps 30 --short-steps 10 2>/dev/null | tail -1 | sed "s/^/tootsie $pair /"
  for steps in 30 10; do
    run=$(mktemp -d /tmp/levbench-XXXX)
    "$PYTHON" benchmarks/levanter_peer.py setup --dir "$run" --steps "$steps" > /dev/null
    (cd "$run" && HF_HUB_OFFLINE=1 /usr/bin/time -v "$LEVANTER_PYTHON" -m levanter.main.train_lm \
      --config_path "$run/config.yaml" > "$run/levanter.log" 2>&1)  # in $run: Levanter writes logs/ to its cwd
    cpu=$(grep -E "User time|System time" "$run/levanter.log" | awk -F: '{s+=$2} END {print s}')
    echo "levanter $pair steps=$steps cpu_s=$cpu $("$PYTHON" benchmarks/levanter_peer.py parse "$run/levanter.log")"
    rm -rf "$run"
  done
done
echo "== done $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
