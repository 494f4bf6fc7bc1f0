"""`tootsie eval crosscheck`: the suite on tootsie's adapter and on lm-eval's `hf` model, compared item by item.

    tootsie eval crosscheck --checkpoint RUN --suite S [--tasks T,...] --data-dir D [--limit N] [--json]

The checkpoint is exported with `tootsie export hf` into a temporary folder
(this is the CLI's job: eval sits below release), then
`eval.crosscheck.run_crosscheck` runs both paths on the same local data. Needs
`tootsie[lmeval,hf]`, checked before anything else.
"""

import argparse
import tempfile
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import print_json, say
from tootsie.eval.crosscheck import CrosscheckConfig
from tootsie.extras import require


def register(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `crosscheck` under `tootsie eval`."""
    parser = verbs.add_parser(
        "crosscheck", help="a suite on tootsie's lm-eval adapter and on lm-eval's hf model, compared item by item"
    )
    metavars = {"checkpoint": "RUN", "tokenizer": "FILE", "suite": "NAME", "data_dir": "DIR", "limit": "N"}
    add_config_flags(
        parser,
        CrosscheckConfig,
        exclude=("tasks",),
        metavars={**metavars, "max_length": "N", "max_gen_toks": "N", "tolerance": "NATS"},
    )
    parser.add_argument(
        "--tasks", metavar="T[,T...]", default="", help="only these benchmarks of the suite (default: all of it)"
    )
    add_output_flags(parser)
    parser.set_defaults(handler=run_crosscheck_command)


def run_crosscheck_command(args: argparse.Namespace) -> int:
    """`tootsie eval crosscheck`: export, run both paths, print one row per benchmark (or the JSON record)."""
    require(("lmeval", "hf"), purpose="eval crosscheck")
    from tootsie.eval.crosscheck import run_crosscheck
    from tootsie.release.checked_export import checked_export
    from tootsie.release.hf_export import find_tokenizer
    from tootsie.train.loading import resolve_checkpoint

    tasks = tuple(name.strip() for name in args.tasks.split(",") if name.strip())
    config = config_from_args(args, CrosscheckConfig, tasks=tasks)
    checkpoint = str(resolve_checkpoint(config.checkpoint))
    tokenizer = find_tokenizer(checkpoint, config.tokenizer)
    with tempfile.TemporaryDirectory(prefix="tootsie-crosscheck-") as work_dir:
        export = checked_export(checkpoint, str(Path(work_dir) / "hf"), ema=config.ema, tokenizer=tokenizer)
        result = run_crosscheck(config, export["out"], tokenizer)
    result |= {"checkpoint": checkpoint, "seconds_export": export["seconds"]}
    if args.json:
        print_json(result)
        return 0
    say(args, f"crosscheck of {checkpoint} ({result['weights']} weights), tolerance {result['tolerance']:g} nats")
    for row in result["tasks"]:
        rate = "n/a" if row["agreement"] is None else f"{row['agreement']:.1%}"
        diff = "-" if row["max_abs_loglik_diff"] is None else f"{row['max_abs_loglik_diff']:.2e}"
        say(
            args,
            f"  {row['task']:<15} items {row['items']:>4}  agree {row['agree']:>4}  ties {row['ties']:>3}  {rate:>6}"
            f"  max |dLL| {diff}  tootsie {row['seconds_tootsie']:.1f} s  hf {row['seconds_hf']:.1f} s",
        )
        for disagreement in row["disagreements"]:
            say(args, f"    {disagreement['item']}: {'; '.join(disagreement['reasons'])}")
    return 0
