"""Held-out preference accuracy of an SFT model and its DPO run on a larger pair set than `tootsie dpo --evaluate`'s.

The demo's held-out preference set has one pair per held-out conversation (26). This builds more pairs from the
same held-out conversations (`corpora.stdlib_preferences`: both rejection kinds, `--seeds` seeds each, duplicates
dropped), tokenizes them with the DPO run's template, scores every pair with both checkpoints
(`eval.reference_logprobs.pair_scores`) and prints, as one JSON line, each model's preference accuracy (chosen
reply more likely) and the discordant pairs (right under one model only), the counts a sign test reads.

    python benchmarks/bench_dpo_heldout.py --prefix DEMO_PREFIX --config dpo.yaml --sft runs/sft --dpo runs/dpo
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from tootsie.configfile import load_config
from tootsie.corpora.stdlib_preferences import REJECTIONS, StdlibPreferenceConfig, preference_lines
from tootsie.datakit.preference_data import PreferenceTokenizeConfig, tokenize_preferences
from tootsie.eval.reference_logprobs import pair_scores
from tootsie.train.config import TrainConfig
from tootsie.train.loading import load_model, resolve_checkpoint


def heldout_pairs(demo: Path, seeds: int) -> list[str]:
    """Every distinct pair line made from the demo's held-out chat conversations."""
    lines = set()
    for chat in sorted((demo / "chat").iterdir()):
        for kind in REJECTIONS:
            for seed in range(seeds):
                config = StdlibPreferenceConfig(chat_sets=(str(chat),), rejection=(kind,), seed=seed)
                lines.update(preference_lines(chat / "heldout.jsonl", config))
    return sorted(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--prefix", required=True, help="the demo's executor prefix (holds demo/chat, demo/tokenizer-*)"
    )
    parser.add_argument("--config", required=True, help="the DPO run's config (model, seq_len)")
    parser.add_argument("--sft", required=True, help="the SFT run or checkpoint (the reference)")
    parser.add_argument("--dpo", required=True, help="the DPO run or checkpoint")
    parser.add_argument("--seeds", type=int, default=4, help="rejected-answer seeds per kind (default 4)")
    parser.add_argument("--chat-template", default="chatml", help="template the runs trained with (default chatml)")
    args = parser.parse_args()
    demo = Path(args.prefix) / "demo"
    config = load_config(args.config, TrainConfig)
    seq_len = config.data.seq_len
    (tokenizer,) = demo.glob("tokenizer-*/tokenizer.json")
    with tempfile.TemporaryDirectory() as scratch:
        pairs = Path(scratch) / "pairs.jsonl"
        pairs.write_text("\n".join(heldout_pairs(demo, args.seeds)) + "\n", encoding="utf-8")
        cache = str(Path(scratch) / "cache")
        tokenize_preferences(PreferenceTokenizeConfig(str(pairs), str(tokenizer), args.chat_template, seq_len), cache)
        right = {}
        for name, run in (("sft", args.sft), ("dpo", args.dpo)):
            scores = pair_scores(load_model(config.model, resolve_checkpoint(run)), cache, seq_len)[0]
            right[name] = scores[:, 0] > scores[:, 1]
    print(
        json.dumps(
            {
                "pairs": int(right["sft"].size),
                "sft_accuracy": round(float(right["sft"].mean()), 4),
                "dpo_accuracy": round(float(right["dpo"].mean()), 4),
                "dpo_only_right": int(np.sum(right["dpo"] & ~right["sft"])),
                "sft_only_right": int(np.sum(right["sft"] & ~right["dpo"])),
            }
        )
    )


if __name__ == "__main__":
    main()
