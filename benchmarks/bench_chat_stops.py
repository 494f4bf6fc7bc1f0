"""How often `tootsie generate --chat` ends its turn within the limit: the SFT model against its base.

For every held-out conversation of the demo's chat sets (`<prefix>/demo/chat/*/heldout.jsonl`), the first
user message is sent through the `tootsie generate` command (its `main`, in this process, so the model
compiles once per checkpoint instead of once per prompt) as

    tootsie generate CHECKPOINT --tokenizer T --chat "<user message>" --max-new-tokens N --json [--chat-template X]

and its `stop_reason` counted. The SFT run is asked with no `--chat-template` (its chat caches' ledgers
name the template); the base checkpoint, which trained on no chat data, gets `--base-chat-template`
(default chatml, the template the SFT run used, so both see the same prompt). `sft_llama3` asks the SFT
run with `--chat-template llama3`, the default before the run's template was looked up.

With `--hf-export DIR` (`tootsie export hf SFT --out DIR`), `transformers` also answers every prompt
greedily (`apply_chat_template`, then `generate(do_sample=False, stop_strings=[end of turn],
tokenizer=...)`, since the demo tokenizer has no single token for `<|im_end|>`), and the new ids are
compared with `tootsie generate`'s.

    python benchmarks/bench_chat_stops.py --prefix DEMO_PREFIX --sft SFT_RUN --max-new-tokens 64
"""

import argparse
import contextlib
import io
import json
import time
from collections import Counter
from pathlib import Path

from tootsie.cli.main import main
from tootsie.corpora.stdlib_chat import HELDOUT_FILE


def heldout_prompts(prefix: Path) -> list[str]:
    """The first user message of every held-out conversation of the demo's chat sets, in path order."""
    prompts = []
    for path in sorted((prefix / "demo" / "chat").glob(f"*/{HELDOUT_FILE}")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                messages = json.loads(line)["messages"]
                prompts.append(next(m["content"] for m in messages if m["role"] == "user"))
    if not prompts:
        raise SystemExit(f"no held-out chat sets under {prefix}/demo/chat; run tootsie sft --example-config first")
    return prompts


def run_generate(arguments: list[str]) -> dict[str, object]:
    """`tootsie generate ... --json` in this process; its JSON line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["generate", *arguments, "--json"])
    if code != 0:
        raise SystemExit(f"tootsie generate {' '.join(arguments)} exited {code}")
    return json.loads(out.getvalue().strip().splitlines()[-1])


def count_stops(
    checkpoint: str, tokenizer: str, prompts: list[str], extra: list[str], replies: list[list[int]] | None = None
) -> dict[str, object]:
    """Stop reasons of greedy replies to every prompt, with the command line used and the wall time.

    The replies' ids are appended to `replies` when given.
    """
    started = time.perf_counter()
    reasons, lengths = Counter(), []
    for prompt in prompts:
        result = run_generate([checkpoint, "--tokenizer", tokenizer, "--chat", prompt, *extra])
        reasons[str(result["stop_reason"])] += 1
        lengths.append(len(result["tokens"]))
        if replies is not None:
            replies.append(list(result["tokens"]))
    return {
        "command": f"tootsie generate {checkpoint} --tokenizer {tokenizer} --chat PROMPT {' '.join(extra)} --json",
        "prompts": len(prompts),
        "end_of_turn": reasons["end_of_turn"],
        "stop_reasons": dict(sorted(reasons.items())),
        "mean_new_tokens": round(sum(lengths) / len(lengths), 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def transformers_replies(export: Path, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """Greedy `transformers` replies (new ids) to every prompt, stopping at the export's end of turn."""
    import torch
    import transformers

    record = json.loads((export / "tootsie_export.json").read_text(encoding="utf-8"))["chat_template"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(export), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(export), dtype=torch.float32, local_files_only=True
    ).eval()
    stops = {} if record["end_of_turn_token_id"] is not None else {"stop_strings": [record["end_of_turn"]]}
    replies = []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        with torch.no_grad():
            output = model.generate(
                torch.tensor([ids]),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.eos_token_id,
                tokenizer=tokenizer,
                **stops,
            )[0].tolist()
        replies.append(output[len(ids) :])
    return replies


def main_cli() -> None:
    """Parse flags, count end-of-turn stops for the SFT run and the base, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, required=True, help="the prefix of tootsie sft --example-config")
    parser.add_argument("--sft", required=True, help="the SFT run (tootsie train --out)")
    parser.add_argument("--base", help="the base checkpoint (default: the demo's train/cooldown run)")
    parser.add_argument("--tokenizer", help="tokenizer.json (default: the demo's tokenizer step)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--base-chat-template", default="chatml")
    parser.add_argument("--hf-export", type=Path, help="the SFT run's HF export, to compare transformers' replies")
    args = parser.parse_args()
    (base,) = (
        [str(p) for p in (args.prefix / "demo" / "train").glob("cooldown-*")] if args.base is None else [args.base]
    )
    (tokenizer,) = (
        [str(p) for p in (args.prefix / "demo").glob("tokenizer-*/tokenizer.json")]
        if args.tokenizer is None
        else [args.tokenizer]
    )
    prompts = heldout_prompts(args.prefix)
    limit = ["--max-new-tokens", str(args.max_new_tokens)]
    replies: list[list[int]] = []
    result: dict[str, object] = {
        "max_new_tokens": args.max_new_tokens,
        "sft": count_stops(args.sft, tokenizer, prompts, limit, replies),
        "base": count_stops(base, tokenizer, prompts, [*limit, "--chat-template", args.base_chat_template]),
        "sft_llama3": count_stops(args.sft, tokenizer, prompts, [*limit, "--chat-template", "llama3"]),
    }
    if args.hf_export is not None:
        theirs = transformers_replies(args.hf_export, prompts, args.max_new_tokens)
        result["transformers_same_replies"] = sum(a == b for a, b in zip(replies, theirs))
    print(json.dumps(result))


if __name__ == "__main__":
    main_cli()
