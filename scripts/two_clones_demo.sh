#!/usr/bin/env bash
# The demo from two clones in different directories, each with its own .venv and prefix, then its manifests compared
# step by step (docs/reproducibility.md). Usage: scripts/two_clones_demo.sh [WORKDIR]   (default /tmp/tootsie-clones)
# Clones the committed HEAD of this checkout; exits non-zero if a demo fails or any step differs.
set -euo pipefail
source_repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/tootsie-clones}"
rm -rf "$work"
clones=("$work/one/tootsie" "$work/two/a/much/deeper/path/tootsie")
for clone in "${clones[@]}"; do
  mkdir -p "$(dirname "$clone")"
  git clone -q "$source_repo" "$clone"
done
for clone in "${clones[@]}"; do
  started=$(date +%s)
  echo "== make demo in $clone ($(git -C "$clone" log --oneline -1 | cut -c1-60))"
  (cd "$clone" && make demo OUT="$clone-prefix") > "$clone.log" 2>&1
  echo "   done in $(( $(date +%s) - started )) s (install and demo); log: $clone.log"
done
"${clones[0]}/.venv/bin/python" "$source_repo/scripts/compare_prefixes.py" "${clones[0]}-prefix" "${clones[1]}-prefix"
