"""`tootsie eval suite`: a benchmark suite (core, reasoning) on local data; `tootsie eval mirror`: fetch the data.

Both need `tootsie[lmeval]`, checked before anything else; its modules are
imported when a command runs. `suite`'s flags come from
`eval.checkpoint_eval.SuiteEvalConfig`.
"""

import argparse
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import emit, print_json, say
from tootsie.eval.benchmarks import SUITES, suite_benchmarks
from tootsie.eval.checkpoint_eval import SuiteEvalConfig
from tootsie.extras import require


def register(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `suite` and `mirror` under `tootsie eval`."""
    suite = verbs.add_parser(
        "suite", help="a benchmark suite (core, reasoning) through lm-eval's task logic on local data files"
    )
    metavars = {"checkpoint": "RUN", "tokenizer": "FILE", "suite": "NAME", "data_dir": "DIR", "limit": "N"}
    add_config_flags(suite, SuiteEvalConfig, metavars={**metavars, "show_prompts": "N"})
    add_output_flags(suite)
    suite.set_defaults(handler=run_suite_command)
    mirror = verbs.add_parser(
        "mirror", help="download benchmark datasets from the Hugging Face Hub into a data dir, with sha256s"
    )
    mirror.add_argument("tasks", nargs="+", metavar="TASK", help=f"benchmarks or suites ({', '.join(SUITES)})")
    mirror.add_argument("--out", required=True, metavar="DIR", help="the data dir (manifest.json goes here)")
    add_output_flags(mirror)
    mirror.set_defaults(handler=run_mirror_command)


def run_suite_command(args: argparse.Namespace) -> int:
    """`tootsie eval suite`: any rendered prompts asked for, then one row per task and metric."""
    from tootsie.eval.checkpoint_eval import checkpoint_suite
    from tootsie.release.hf_export import find_tokenizer

    result = checkpoint_suite(config_from_args(args, SuiteEvalConfig), find_tokenizer)
    for name, prompts in result.get("prompts", {}).items():
        for index, prompt in enumerate(prompts):
            say(args, f"=== {name} document {index}\n{prompt}\n")
    if args.json:
        print_json(result)
        return 0
    say(
        args,
        f"suite {result['suite']} on {result['checkpoint']} ({result['weights']} weights,"
        f" prompt format {result['prompt_format']})",
    )
    for row in result["results"]:
        value = "refused" if row["value"] is None else f"{row['value']:.4f}"
        stderr = "" if row["stderr"] is None else f" ± {row['stderr']:.4f}"
        say(args, f"  {row['task']:<15} {row['prompt_format']:<8} {row['metric']:<26} {value}{stderr}  (n={row['n']})")
        if "refused" in row:
            say(args, f"    {row['refused']}")
    return 0


def run_mirror_command(args: argparse.Namespace) -> int:
    """`tootsie eval mirror`."""
    require(("lmeval",), purpose="eval mirror (it reads the Hub through `datasets`)")
    from tootsie.eval.benchmark_data import mirror

    benchmarks = {b.name: b for task in args.tasks for b in suite_benchmarks(task)}
    files = mirror(list(benchmarks.values()), Path(args.out))
    return emit({"out": args.out, "files": files}, args, f"mirrored {len(files)} files into {args.out}")
