"""`tootsie eval suite`: a benchmark suite (core, reasoning) on local data; `tootsie eval mirror`: fetch the data.

Both need `tootsie[lmeval]`, checked before anything else; its modules are
imported when a command runs.
"""

import argparse
import json
import tempfile
from pathlib import Path

from tootsie.cli.output import emit
from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import BENCHMARKS, SUITES, suite_benchmarks
from tootsie.extras import require
from tootsie.release.hf_export import find_tokenizer
from tootsie.train.loading import resolve_checkpoint


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `suite` and `mirror` under `tootsie eval`."""
    suite = commands.add_parser(
        "suite", help="a benchmark suite (core, reasoning) through lm-eval's task logic on local data files"
    )
    suite.add_argument("--checkpoint", required=True, metavar="RUN", help="a checkpoint or a training output dir")
    suite.add_argument(
        "--suite",
        required=True,
        metavar="NAME",
        help=f"{' or '.join(SUITES)}, or benchmark names joined by commas ({', '.join(BENCHMARKS)})",
    )
    suite.add_argument(
        "--data-dir", required=True, metavar="DIR", help="local copies laid out as `tootsie eval mirror` writes them"
    )
    suite.add_argument("--limit", type=int, default=None, metavar="N", help="the first N documents of each task")
    suite.add_argument(
        "--prompt-format",
        choices=("lm-eval", "olmes", "both"),
        default="lm-eval",
        help="lm-eval's stock prompts, OLMES-style ones where a task has them, or both side by side",
    )
    suite.add_argument(
        "--tokenizer", default=None, metavar="T", help="tokenizer.json (default: the one that trained the run)"
    )
    suite.add_argument("--max-length", type=int, default=128, metavar="TOKENS", help="longest model input (128)")
    suite.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (default 8)")
    suite.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    suite.add_argument(
        "--show-prompts", type=int, default=0, metavar="N", help="print the first N rendered prompts of every task"
    )
    suite.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    suite.set_defaults(handler=run_suite_command)
    mirror = commands.add_parser(
        "mirror", help="download benchmark datasets from the Hugging Face Hub into a data dir, with sha256s"
    )
    mirror.add_argument("tasks", nargs="+", metavar="TASK", help=f"benchmarks or suites ({', '.join(SUITES)})")
    mirror.add_argument("--out", required=True, metavar="DIR", help="the data dir (manifest.json goes here)")
    mirror.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    mirror.set_defaults(handler=run_mirror_command)


def _load_suite() -> tuple[object, object]:
    from tootsie.eval.lm_eval_adapter import TootsieLM
    from tootsie.eval.suite import run_suite

    return TootsieLM, run_suite


def run_suite_command(args: argparse.Namespace) -> int:
    """`tootsie eval suite`."""
    require(("lmeval",), purpose="eval suite")
    if not Path(args.data_dir).is_dir():
        raise TootsieError(
            f"--data-dir {args.data_dir} is not a directory; run `tootsie eval mirror {args.suite} --out DIR` first"
        )
    suite_benchmarks(args.suite)
    TootsieLM, run_suite = _load_suite()
    checkpoint = resolve_checkpoint(args.checkpoint)
    lm = TootsieLM.from_checkpoint(  # type: ignore[attr-defined]
        str(checkpoint),
        str(find_tokenizer(checkpoint, args.tokenizer)),
        weights="ema" if args.ema else "model",
        max_length=args.max_length,
        batch_size=args.batch_size,
    )
    with tempfile.TemporaryDirectory(prefix="tootsie-suite-") as work_dir:
        result = run_suite(  # type: ignore[operator]
            lm,
            args.suite,
            args.data_dir,
            work_dir,
            prompt_format=args.prompt_format,
            limit=args.limit,
            show_prompts=args.show_prompts,
        )
    result = {"checkpoint": str(checkpoint), "weights": "ema" if args.ema else "model"} | result
    for name, prompts in result.get("prompts", {}).items():
        for index, prompt in enumerate(prompts):
            print(f"=== {name} document {index}\n{prompt}\n")
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"suite {args.suite} on {checkpoint} ({result['weights']} weights, prompt format {args.prompt_format})")
    for row in result["results"]:
        value = "refused" if row["value"] is None else f"{row['value']:.4f}"
        stderr = "" if row["stderr"] is None else f" ± {row['stderr']:.4f}"
        print(f"  {row['task']:<15} {row['prompt_format']:<8} {row['metric']:<26} {value}{stderr}  (n={row['n']})")
        if "refused" in row:
            print(f"    {row['refused']}")
    return 0


def run_mirror_command(args: argparse.Namespace) -> int:
    """`tootsie eval mirror`."""
    require(("lmeval",), purpose="eval mirror (it reads the Hub through `datasets`)")
    from tootsie.eval.benchmark_data import mirror

    benchmarks = {b.name: b for task in args.tasks for b in suite_benchmarks(task)}
    files = mirror(list(benchmarks.values()), Path(args.out))
    return emit({"out": args.out, "files": files}, args, f"mirrored {len(files)} files into {args.out}")
