"""Rollout sampling speed: tootsie's KV-cache generator against `transformers`' `generate` on the same exported model.

A random Llama (`--shape`) is saved as a tootsie checkpoint and exported to
Hugging Face format (`release.hf_export.export_hf`, with a 300-token BPE
trained on a few strings, as the release tests do); `transformers` loads the
export in float32 from local files only. Both sample the same batch of
prompts (`--batch` rows of `--prompt-len` tokens, all one length, so neither
pads) at the same settings: temperature, top-p, no top-k (transformers'
default top_k=50 is switched off), and exactly `--new-tokens` tokens per row
(no stop token; `min_new_tokens` on the transformers side). This is what an RL
rollout asks of the generator; the log-prob recomputation that follows it in
`rl.rollout` is not timed here.

Each method runs once to warm up (JAX compiles), then `--repeats` times
interleaved (tootsie, transformers, tootsie, ...); the medians give tokens/s
and their ratio, printed as one JSON line with the load average, since the
machine may be shared. On a shared 2-core machine torch's two OpenMP threads
can lose to one (`--torch-threads 1`): a descheduled thread stalls the other
at every barrier; run both and compare against the faster.

    python benchmarks/bench_rollout.py --shape small --batch 8 --prompt-len 32 --new-tokens 128 --repeats 5
"""

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import jax
import pyarrow as pa
import torch
import transformers
from bench_generate import _time_interleaved  # a sibling script, importable when this one runs as one

from tootsie.configfile import to_plain
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.models.presets import PRESETS
from tootsie.release.hf_export import export_hf
from tootsie.train.checkpoint import save_checkpoint

SHAPES = {"small": LlamaConfig(), "125m": PRESETS["125m"]}
"""`small`: LlamaConfig's defaults (hidden 256, 4 layers, vocab 4096); `125m`: the preset."""
TEXTS = [f"def f{i}(x):\n    return x + {i}  # the value {i * i}\n" for i in range(60)]
"""Training text of the export's tokenizer (its ids are never used: prompts are raw ids)."""


def export(config: LlamaConfig, work: Path) -> Path:
    """A random model of `config` saved as a checkpoint and exported to HF format under `work`; the export's path."""
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}), work / "docs" / "0.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(work / "docs"),), vocab_size=300), str(work / "tok"))
    model = LlamaModel(config, key=jax.random.PRNGKey(0))
    state = {"tokens": 0, "kind": "permanent", "model": to_plain(config)}
    checkpoint = save_checkpoint(work / "run" / "checkpoints", 1, {"model": model}, state)
    export_hf(checkpoint, work / "hf", tokenizer=work / "tok" / "tokenizer.json")
    return work / "hf"


def main() -> None:
    """Time both generators at one batch and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--torch-threads", type=int, help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    config = SHAPES[args.shape]
    prompts = [[(7 * row + 3 * i + 1) % config.vocab_size for i in range(args.prompt_len)] for row in range(args.batch)]
    with tempfile.TemporaryDirectory(prefix="bench-rollout-") as work:
        hf_dir = export(config, Path(work))
        ours = LlamaModel(config, key=jax.random.PRNGKey(0))
        theirs = transformers.AutoModelForCausalLM.from_pretrained(
            str(hf_dir), dtype=torch.float32, local_files_only=True
        ).eval()
    calls = {"tootsie": 0, "transformers": 0}

    def run_tootsie() -> int:
        calls["tootsie"] += 1
        sampling = SamplingConfig(
            max_new_tokens=args.new_tokens, temperature=args.temperature, top_p=args.top_p, seed=calls["tootsie"]
        )
        return sum(len(g.tokens) for g in generate(ours, prompts, sampling))

    def run_transformers() -> int:
        calls["transformers"] += 1
        torch.manual_seed(calls["transformers"])
        with torch.no_grad():
            out = theirs.generate(
                torch.tensor(prompts),
                attention_mask=torch.ones(args.batch, args.prompt_len, dtype=torch.long),
                do_sample=True,
                temperature=args.temperature,
                top_p=args.top_p,
                top_k=0,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                pad_token_id=theirs.generation_config.eos_token_id,
            )
        return int(out[:, args.prompt_len :].numel())

    seconds, tokens = _time_interleaved({"tootsie": run_tootsie, "transformers": run_transformers}, args.repeats)
    rates = {name: tokens[name] / statistics.median(values) for name, values in seconds.items()}
    print(
        json.dumps(
            {
                "shape": args.shape,
                "batch": args.batch,
                "prompt_len": args.prompt_len,
                "new_tokens": args.new_tokens,
                "temperature": args.temperature,
                "top_p": args.top_p,
                "tootsie_tokens_per_s": round(rates["tootsie"], 1),
                "transformers_tokens_per_s": round(rates["transformers"], 1),
                "ratio": round(rates["tootsie"] / rates["transformers"], 2),
                "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
                "torch_threads": torch.get_num_threads(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "device": str(jax.devices()[0]),
                "transformers": transformers.__version__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
