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
"""

import argparse
import json
import re
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

VOCAB_SIZE = 8192
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
train_seq_len: {seq_len}
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


def setup(root: Path, steps: int, seq_len: int, batch_size: int) -> None:
    """Write the documents, the id-per-word tokenizer and Levanter's config under `root`, which must be new or empty."""
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
        CONFIG.format(root=root, tokenizer=tokenizer_dir, seq_len=seq_len, batch_size=batch_size, steps=steps + 1),
        encoding="utf-8",
    )
    print(f"wrote {root}/config.yaml ({int(lengths.sum()):,} tokens of documents)")


def parse(log: Path) -> dict[str, float]:
    """Steady-state tokens/s (steps after the first) and peak RSS from a Levanter log run under `time -v`."""
    durations, tokens_per_step = {}, None
    text = log.read_text(encoding="utf-8", errors="replace")
    for line in text.splitlines():
        if '"event": "log"' not in line:
            continue
        record = json.loads(line[line.index("{") :])
        metrics = record["metrics"]
        if "throughput/duration" in metrics:
            durations[record["step"]] = float(metrics["throughput/duration"])
            tokens_per_step = float(metrics["throughput/tokens_per_second"]) * float(metrics["throughput/duration"])
    if not durations or tokens_per_step is None:
        raise SystemExit(f"{log}: no per-step throughput records; did the run finish?")
    timed = [seconds for step, seconds in sorted(durations.items()) if step != min(durations)]
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return {
        "steps_timed": len(timed),
        "tokens_per_s": round(tokens_per_step * len(timed) / sum(timed), 1),
        "step_seconds_mean": round(sum(timed) / len(timed), 4),
        "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else float("nan"),
    }


def main() -> None:
    """`setup` writes the peer's inputs; `parse` prints its figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("setup")
    make.add_argument("--dir", type=Path, required=True)
    make.add_argument("--steps", type=int, default=30)
    make.add_argument("--seq-len", type=int, default=256)
    make.add_argument("--batch-size", type=int, default=16)
    read = commands.add_parser("parse")
    read.add_argument("log", type=Path)
    args = parser.parse_args()
    if args.command == "setup":
        setup(args.dir.resolve(), args.steps, args.seq_len, args.batch_size)
    else:
        print(json.dumps({"benchmark": "levanter_train_lm_cpu", **parse(args.log)}))


if __name__ == "__main__":
    main()
