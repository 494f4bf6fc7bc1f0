"""Set up (and read back) the peer run of `bench_train_cpu.py`: Levanter's `train_lm` on the same shape.

Levanter runs in its own virtualenv (`python3 -m venv /tmp/lev && /tmp/lev/bin/pip
install marin-levanter gitpython`); this script only writes its inputs and reads
its log, so tootsie never imports Levanter:

    run=$(mktemp -d /tmp/levbench-XXXX)   # a fresh directory for every run
    python benchmarks/levanter_peer.py setup --dir $run
    HF_HUB_OFFLINE=1 /usr/bin/time -v /tmp/lev/bin/python -m levanter.main.train_lm \
        --config_path $run/config.yaml > $run/levanter.log 2>&1
    python benchmarks/levanter_peer.py parse $run/levanter.log

`setup` refuses a directory that already holds anything: Levanter would find
its token cache there and skip tokenizing, so a second run would be timed on
less work than the first.

The data are the same synthetic documents as `bench_train_cpu.py` (4,000
documents of 100–2,000 uniform token ids, vocab 8,192, seed 0) written as text
of space-separated ids, read through a word-level tokenizer whose token `"i"`
has id `i` (a local `tokenizer.json`, as Levanter needs one offline for both
`data.tokenizer` and `model.tokenizer`). Shape: hidden 256, 4 layers, 4 heads,
SwiGLU 1024, seq 256, batch 16, float32, untied head; Levanter's defaults
otherwise (gradient checkpointing on, cosine schedule).

`setup --model moe` writes the peer of `bench_moe.py`'s `moe8` instead:
Levanter's `qwen3_moe` (8 experts of width 512, k = 2, QK-norm, dropless),
run with `--batch-size 4` by `benchmarks/moe_pairs.sh`.
"""

import argparse
import json
import os
import re
import resource
import subprocess
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

VOCAB_SIZE = 8192
MODELS = {
    "dense": """\
model:
  type: llama
  max_seq_len: {seq_len}
  hidden_dim: 256
  intermediate_dim: 1024
  num_layers: 4
  num_heads: 4
  num_kv_heads: 4
  tie_word_embeddings: false
  tokenizer: {tokenizer}
""",
    # bench_moe.py's moe8: 8 experts of width 512, k = 2, QK-norm; Levanter's MoE is dropless (no capacity).
    "moe": """\
model:
  type: qwen3_moe
  max_seq_len: {seq_len}
  hidden_dim: 256
  intermediate_dim: 1024
  moe_intermediate_dim: 512
  num_layers: 4
  num_heads: 4
  num_kv_heads: 4
  head_dim: 64
  num_experts: 8
  num_experts_per_tok: 2
  norm_topk_prob: true
  use_qk_norm: true
  tie_word_embeddings: false
  tokenizer: {tokenizer}
""",
}
"""`setup --model` → Levanter's model section."""
OFFLINE = {"HF_HUB_OFFLINE": "1"}
"""Levanter's environment: the tokenizer is local, nothing is fetched."""
CONFIG = """\
data:
  tokenizer: {tokenizer}
  cache_dir: {root}/cache
  components:
    synthetic:
      source:
        type: url
        train_urls: ["{root}/train.jsonl"]
      cache_dir: {root}/cache/synthetic
{model}train_seq_len: {seq_len}
trainer:
  require_accelerator: false
  mp: p=f32,c=f32
  train_batch_size: {batch_size}
  num_train_steps: {steps}
  steps_per_eval: 1000000
  tracker:
    type: json_logger
  checkpointer:
    base_path: {root}/checkpoints
    save_interval: 1000h
    keep: []
  log_jaxprs: false
  log_xla_hlo: false
optimizer:
  learning_rate: 1e-3
  warmup: 0.05
"""


def setup(root: Path, steps: int, seq_len: int, batch_size: int, model: str = "dense") -> None:
    """Write the documents, the id-per-word tokenizer and Levanter's `model` config under `root` (new or empty)."""
    if root.exists() and any(root.iterdir()):
        raise SystemExit(
            f"{root} is not empty: Levanter would reuse the token cache of an earlier run there; "
            "give every run a fresh directory, e.g. --dir $(mktemp -d /tmp/levbench-XXXX)"
        )
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 2000, size=4000)
    with open(root / "train.jsonl", "w", encoding="utf-8") as out:
        for length in lengths:
            out.write(json.dumps({"text": " ".join(map(str, rng.integers(0, VOCAB_SIZE, size=int(length))))}) + "\n")
    tokenizer_dir = root / "tokenizer"
    tokenizer_dir.mkdir(exist_ok=True)
    tokenizer = Tokenizer(models.WordLevel({str(i): i for i in range(VOCAB_SIZE)}, unk_token="0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tokenizer_dir / "tokenizer.json"))
    (tokenizer_dir / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "0"}), encoding="utf-8"
    )
    # One warm-up step (compilation) plus the timed ones, as bench_train_cpu.py.
    (root / "config.yaml").write_text(
        CONFIG.format(
            root=root,
            tokenizer=tokenizer_dir,
            model=MODELS[model].format(seq_len=seq_len, tokenizer=tokenizer_dir),
            seq_len=seq_len,
            batch_size=batch_size,
            steps=steps + 1,
        ),
        encoding="utf-8",
    )
    print(f"wrote {root}/config.yaml ({int(lengths.sum()):,} tokens of documents)")


def throughput_records(text: str) -> dict[int, dict]:
    """Each step's `throughput/` metrics from a Levanter log's json_logger lines, by step."""
    records = {}
    for line in text.splitlines():
        if '"event": "log"' in line:
            record = json.loads(line[line.index("{") :])
            if "throughput/duration" in record["metrics"]:
                records[record["step"]] = record["metrics"]
    return records


def parse(log: Path, cpu_at_step: dict[int, float] | None = None) -> dict[str, float]:
    """Steady-state tokens/s (steps after the first) and peak RSS from a Levanter log run under `time -v`.

    With `cpu_at_step` (the process's CPU seconds when each step's record appeared, from `run`), also CPU s/step
    over the steps after the first.
    """
    text = log.read_text(encoding="utf-8", errors="replace")
    records = throughput_records(text)
    if not records:
        raise SystemExit(f"{log}: no per-step throughput records; did the run finish?")
    metrics = next(iter(records.values()))
    tokens_per_step = float(metrics["throughput/tokens_per_second"]) * float(metrics["throughput/duration"])
    timed = [float(records[step]["throughput/duration"]) for step in sorted(records)[1:]]
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    result = {
        "steps_timed": len(timed),
        "tokens_per_s": round(tokens_per_step * len(timed) / sum(timed), 1),
        "step_seconds_mean": round(sum(timed) / len(timed), 4),
        "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else float("nan"),
    }
    if cpu_at_step and len(cpu_at_step) > 1:
        first, last = min(cpu_at_step), max(cpu_at_step)
        result["cpu_seconds_per_step"] = round((cpu_at_step[last] - cpu_at_step[first]) / (last - first), 3)
    return result


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(root: Path, python: str) -> dict[str, float]:
    """Run `train_lm` on `root`'s config, noting its CPU seconds as each step's record appears; `parse`'s figures.

    CPU s/step comes from inside the one run (compilation and cache building, which vary by minutes
    on a shared machine, are before the first sample); peak RSS is the child's maximum resident set.
    """
    log, cpu_at_step = root / "levanter.log", {}
    command = [python, "-m", "levanter.main.train_lm", "--config_path", str(root / "config.yaml")]
    with open(log, "w", encoding="utf-8") as out:
        # In `root`: Levanter writes logs/ to its working directory.
        child = subprocess.Popen(command, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=os.environ | OFFLINE)
        while child.poll() is None:
            steps = throughput_records(log.read_text(encoding="utf-8", errors="replace"))
            cpu = process_cpu_seconds(child.pid)
            cpu_at_step.update({step: cpu for step in steps if step not in cpu_at_step})
            time.sleep(0.2)
    if child.returncode:
        raise SystemExit(f"Levanter exited with {child.returncode}; see {log}")
    result = parse(log, cpu_at_step)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return result


def main() -> None:
    """`setup` writes the peer's inputs; `parse` prints its figures as one JSON line; `run` runs it and prints them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("setup")
    make.add_argument("--dir", type=Path, required=True)
    make.add_argument("--steps", type=int, default=30)
    make.add_argument("--seq-len", type=int, default=256)
    make.add_argument("--batch-size", type=int, default=16)
    make.add_argument("--model", choices=sorted(MODELS), default="dense", help="moe: bench_moe.py's moe8 shape")
    read = commands.add_parser("parse")
    read.add_argument("log", type=Path)
    watch = commands.add_parser("run", help="run train_lm on a set-up --dir and print its figures with CPU s/step")
    watch.add_argument("--dir", type=Path, required=True)
    watch.add_argument("--python", default="/tmp/lev/bin/python", help="the Levanter virtualenv's python")
    args = parser.parse_args()
    if args.command == "setup":
        setup(args.dir.resolve(), args.steps, args.seq_len, args.batch_size, args.model)
    elif args.command == "parse":
        print(json.dumps({"benchmark": "levanter_train_lm_cpu", **parse(args.log)}))
    else:
        print(json.dumps({"benchmark": "levanter_train_lm_cpu", **run(args.dir.resolve(), args.python)}))


if __name__ == "__main__":
    main()
