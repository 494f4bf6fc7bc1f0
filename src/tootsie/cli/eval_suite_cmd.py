"""`tootsie eval suite`: a benchmark suite (core, reasoning, marin-base) on local data; `tootsie eval mirror`: fetch
the data; `tootsie eval fixtures`: write made-up data in the same layout, for offline runs and checks.

`suite` and `mirror` need `tootsie[lmeval]`, checked before anything else; its
modules are imported when a command runs. `suite`'s flags come from
`eval.checkpoint_eval.SuiteEvalConfig`. `fixtures` needs nothing extra.
"""

import argparse
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import emit, print_json, say
from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import BENCHMARKS, SUITES, suite_benchmarks
from tootsie.eval.checkpoint_eval import SuiteEvalConfig
from tootsie.extras import require


def register(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `suite`, `mirror` and `fixtures` under `tootsie eval`."""
    suite = verbs.add_parser(
        "suite", help="a benchmark suite (core, reasoning, marin-base) through lm-eval's task logic on local data files"
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
    fixtures = verbs.add_parser(
        "fixtures",
        help="write MADE-UP benchmark rows (not the real data) in the mirror layout, with sha256s, for offline runs",
        description="Writes invented rows in each benchmark's Hugging Face schema, laid out as `tootsie eval mirror`"
        " lays out the real data, with a manifest.json of sha256s. The rows are made up: scores on them say nothing"
        " about a model, only whether scoring runs and whether two scoring paths agree.",
    )
    fixtures.add_argument("tasks", nargs="*", metavar="TASK", help="benchmarks or suites (default: all benchmarks)")
    fixtures.add_argument("--suite", metavar="S", help=f"a suite's benchmarks ({', '.join(SUITES)})")
    fixtures.add_argument("--out", required=True, metavar="DIR", help="the data dir (manifest.json goes here)")
    fixtures.add_argument("--rows", type=int, default=50, metavar="N", help="made-up rows per split (default 50)")
    add_output_flags(fixtures)
    fixtures.set_defaults(handler=run_fixtures_command)


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
        shots = f", {row['num_fewshot']}-shot" if "num_fewshot" in row else ""
        say(
            args,
            f"  {row['task']:<15} {row['prompt_format']:<8} {row['metric']:<26} {value}{stderr}  (n={row['n']}{shots})",
        )
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


def run_fixtures_command(args: argparse.Namespace) -> int:
    """`tootsie eval fixtures`: made-up rows for the named benchmarks or suite (all benchmarks by default)."""
    from tootsie.eval.benchmark_rows import write_benchmark_rows

    if args.suite and args.tasks:
        raise TootsieError(f"give --suite or TASK names, not both (got --suite {args.suite} and {args.tasks})")
    chosen = [args.suite] if args.suite else args.tasks
    names = list({b.name: b for task in chosen for b in suite_benchmarks(task)} if chosen else BENCHMARKS)
    files = write_benchmark_rows(Path(args.out), names, args.rows)
    result = {"out": args.out, "rows": args.rows, "benchmarks": names, "files": [str(path) for path in files]}
    if args.json:
        print_json(result)
        return 0
    say(
        args,
        f"wrote {len(files)} files of made-up rows ({args.rows} per split) into {args.out}",
        f"  benchmarks: {', '.join(names)}",
        "  the rows are invented, not the benchmarks' data: use them to check scoring, never to report a score",
    )
    return 0
