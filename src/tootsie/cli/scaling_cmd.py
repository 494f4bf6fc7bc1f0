r"""`tootsie scaling ...`: plan isoflop sweeps, fit scaling laws, predict, preregister and score predictions.

    tootsie scaling sweep --budgets 1.25e11,2.5e11,5e11,1e12 --widths 16,32,48,64,96 \
        --rule tiny --window 3 --out plan.json [--moe --experts 8 --k 2]
    tootsie scaling heuristic --budget 1e23 --hidden-dim 5120 --moe --experts 64 --k 4 --json
    tootsie scaling fit RUNS... --out fit.json [--fixed-asymptote 1.6,1.7] [--target 4e12] [--max-budget 5e11] [--json]
    tootsie scaling predict --fit fit.json --compute 1e12 [--json]
    tootsie scaling preregister --fit fit.json --compute 1e12 --name tiny-1e12 --out prereg.json
    tootsie scaling score prereg.json --runs runs.jsonl          (or --actual LOSS)
    tootsie scaling batch-size RUNS... [--tolerance 0.01] [--compute 1e23]

The settings of `sweep`, `fit` and `batch-size` are flags derived from
`SweepConfig`, `FitConfig` and `BatchSizeConfig` (`cli.options`; old
spellings kept: `--flops` for `--flops-rule`, `--exclude-embeddings` for
`--no-include-embeddings`, `--fixed-asymptote` for `--fixed-e`). Warnings (a
fallback minimum, an exponent at its search bound) go to stderr (not with
`--quiet`) and, with `--json`, into the JSON object.
"""

import argparse
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import emit, print_json, say, warn
from tootsie.cli.scaling_heuristic_cmd import add_moe_flags, moe_fields, register_heuristic
from tootsie.jsonfile import write_json_atomic
from tootsie.scaling.batch_size import BatchSizeConfig, batch_at, fit_batch_sizes
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.heuristic import FLOPS_RULES
from tootsie.scaling.predict import load_fit, predict
from tootsie.scaling.preregister import load_record, outcome_from_runs, preregister, preregistration_time, score
from tootsie.scaling.runs import BATCH_FIELDS, infeasible_list, load_runs
from tootsie.scaling.shapes import WIDTH_RULES
from tootsie.scaling.sweep import SweepConfig, plan_sweep, plan_to_json
from tootsie.scaling.tables import aligned, cross_validation_rows, stability_rows

Commands = "argparse._SubParsersAction[argparse.ArgumentParser]"


def register(subparsers: Commands) -> None:
    """Add `tootsie scaling` and its subcommands."""
    scaling = subparsers.add_parser(
        "scaling", help="isoflop sweeps, scaling-law fits, predictions and preregistrations"
    )
    commands = scaling.add_subparsers(dest="scaling_command", required=True, metavar="COMMAND")
    registers = (
        _register_sweep,
        register_heuristic,
        _register_fit,
        _register_predict,
        _register_preregister,
        _register_score,
    )
    for add in (*registers, _register_batch_size):
        add_output_flags(add(commands))


def _register_sweep(commands: Commands) -> argparse.ArgumentParser:
    sweep = commands.add_parser("sweep", help="plan an isoflop sweep: shapes, tokens and steps per budget")
    add_config_flags(
        sweep,
        SweepConfig,
        exclude=("rule", "moe", "beta2"),
        aliases={"flops_rule": ("--flops",)},
        false_flags={"include_embeddings": ("--exclude-embeddings",)},
        choices={"flops_rule": FLOPS_RULES},
    )
    sweep.add_argument(
        "--rule",
        choices=sorted(WIDTH_RULES),
        default="marin",
        help="width rule: Marin's recipe (MHA, or GQA 4:1 as the seeds' MoE), or its CPU-sized copies",
    )
    add_moe_flags(sweep)
    sweep.add_argument(
        "--out",
        metavar="PLAN.json",
        help="write the plan here (TOOTSIE_SCALING_PLAN=PLAN.json tootsie run experiments/isoflop_tiny.py runs it)",
    )
    sweep.set_defaults(handler=run_sweep)
    return sweep


def _register_fit(commands: Commands) -> argparse.ArgumentParser:
    fit = commands.add_parser(
        "fit", help="fit isoflop minima, L(C) (free and fixed E), N_opt(C), D_opt(C), with intervals"
    )
    _add_runs(fit, "compute, params, tokens, loss")
    fit.add_argument("--out", required=True, metavar="FIT.json", help="the fit file (plots go next to it)")
    add_config_flags(
        fit,
        FitConfig,
        aliases={"fixed_e": ("--fixed-asymptote",)},
        metavars={"fixed_e": "E", "max_budget": "C", "loss_noise": "SIGMA", "target": "C"},
    )
    _add_drop_nonfinite(fit)
    fit.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    fit.set_defaults(handler=run_fit)
    return fit


def _add_runs(parser: argparse.ArgumentParser, fields: str) -> None:
    """The RUNS positional: the runs to fit, and the fields each must have."""
    help_text = f"run directories (run.json or runs.jsonl) or JSONL files with {fields}"
    parser.add_argument("runs", nargs="+", metavar="RUNS", help=help_text)


def _add_drop_nonfinite(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drop-nonfinite",
        action="store_true",
        help="leave out runs with a NaN/inf loss (listed in the output) instead of failing",
    )


def _add_prediction(parser: argparse.ArgumentParser) -> None:
    """--fit, --compute and --law: which prediction."""
    parser.add_argument("--fit", required=True, metavar="FILE", help="a `tootsie scaling fit` output")
    parser.add_argument("--compute", type=float, required=True, metavar="C", help="the budget in FLOPs")
    parser.add_argument(
        "--law",
        default=None,
        metavar="KEY",
        help="a law of the fit: free, fixed or fixed=<E> (default: fixed E when the fit has it, else free)",
    )


def _register_predict(commands: Commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("predict", help="predicted loss with an interval, and N_opt, D_opt, at a budget")
    _add_prediction(parser)
    parser.set_defaults(handler=run_predict)
    return parser


def _register_preregister(commands: Commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("preregister", help="write a timestamped, hashed prediction record before a run")
    _add_prediction(parser)
    parser.add_argument("--name", required=True, help="the run the prediction is for")
    parser.add_argument("--out", required=True, metavar="RECORD.json", help="never overwritten")
    parser.add_argument("--note", default="", help="free text kept in the record")
    parser.set_defaults(handler=run_preregister)
    return parser


def _register_score(commands: Commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("score", help="compare a preregistered prediction with the outcome")
    parser.add_argument("record", metavar="RECORD.json")
    outcome = parser.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--actual", type=float, metavar="LOSS", help="the measured loss")
    outcome.add_argument(
        "--runs",
        nargs="+",
        metavar="RUNS",
        help="runs at the record's budget: one run, or 3+ sizes (their isoflop minimum)",
    )
    parser.set_defaults(handler=run_score)
    return parser


def _register_batch_size(commands: Commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "batch-size", help="optimal and critical batch sizes from batch sweeps at fixed budgets, as power laws in C"
    )
    _add_runs(parser, "compute, batch_size, loss")
    add_config_flags(parser, BatchSizeConfig)
    parser.add_argument(
        "--compute", type=float, default=None, metavar="C", help="also project both batch sizes to this budget"
    )
    _add_drop_nonfinite(parser)
    parser.add_argument("--out", metavar="FILE", help="write the result as JSON")
    parser.set_defaults(handler=run_batch_size)
    return parser


def run_sweep(args: argparse.Namespace) -> int:
    """`tootsie scaling sweep`."""
    config = config_from_args(args, SweepConfig, rule=WIDTH_RULES[args.rule](), **moe_fields(args))
    plan = plan_sweep(config)
    payload = plan_to_json(plan)
    if args.out:
        write_json_atomic(args.out, payload)
    if args.json:
        print_json(payload)
        return 0
    say(
        args,
        f"{len(plan.runs)} runs over {len(config.budgets)} budgets ({len(plan.skipped)} skipped)"
        f"{f'; plan written to {args.out}' if args.out else ''}",
        f"  {'run':>22} {'layers':>6} {'heads':>5} {'params':>10} {'total':>10} {'tokens':>10} {'steps':>6}"
        f" {'batch':>5} {'flops':>9} {'6ND':>9} {'lr':>7} {'beta2':>6}",
    )
    say(
        args,
        *(
            f"  {run.name:>22} {run.model.num_layers:>6} {run.model.num_heads:>5} {run.params:>10,}"
            f" {run.params_total:>10,} {run.tokens:>10,} {run.steps:>6} {run.batch_size:>5} {run.flops:>9.3g}"
            f" {run.flops_6nd:>9.3g} {run.learning_rate:>7.2g} {run.beta2 or '-':>6.4}"
            for run in plan.runs
        ),
        *(f"  skipped {skipped.budget:.3g} width {skipped.width}: {skipped.reason}" for skipped in plan.skipped),
    )
    return 0


def _without_samples(entry: dict[str, object]) -> dict[str, object]:
    """A law's summary without its bootstrap samples (the file keeps them, stdout does not)."""
    return {key: value for key, value in entry.items() if key != "samples"}


def _fit_summary(fit: dict[str, object], out: Path, plots: list[str]) -> dict[str, object]:
    return {
        "out": str(out),
        "budgets": [
            {k: b[k] for k in ("compute", "params_opt", "tokens_opt", "loss_opt", "method")} for b in fit["budgets"]
        ],
        "laws": {kind: _without_samples(law) for kind, law in fit["laws"].items()},
        "params_opt": _without_samples(fit["params_opt"]),
        "tokens_opt": _without_samples(fit["tokens_opt"]),
        "cross_validation": fit["cross_validation"],
        **({"stability": fit["stability"]} if "stability" in fit else {}),
        "noise": fit["noise"],
        "excluded": len(fit["excluded"]),
        "dropped": fit["dropped"],
        "infeasible": fit["infeasible"],
        "warnings": fit["warnings"],
        "plots": plots,
    }


def run_fit(args: argparse.Namespace) -> int:
    """`tootsie scaling fit`: the fit file, its plots, and a summary."""
    fit = fit_runs(load_runs(args.runs, drop_nonfinite=args.drop_nonfinite), config_from_args(args, FitConfig))
    out = Path(args.out)
    write_json_atomic(out, fit)
    plots = [] if args.no_plots else _plots(fit, out)
    warn(
        args,
        *(f"dropped {r['source']}: loss {r['loss']}" for r in fit["dropped"]),
        *_infeasible_warnings(fit["infeasible"]),
        *fit["warnings"],
    )
    if args.json:
        print_json(_fit_summary(fit, out, plots))
    else:
        say(args, *_fit_lines(fit, out, plots))
    return 0


def _infeasible_warnings(infeasible: list[dict[str, object]]) -> list[str]:
    """One stderr line per infeasible run: which, at what budget, and why."""
    return [f"infeasible {r['source']} (C={r['compute']:.4g}): {r['reason']}; left out" for r in infeasible]


def _plots(fit: dict[str, object], out: Path) -> list[str]:
    """The isoflop and law figures next to the fit file (matplotlib is imported only here)."""
    from tootsie.scaling.plots import plot_isoflops, plot_laws

    return [
        str(plot_isoflops(fit, out.with_name(f"{out.stem}-isoflops.png"))),
        str(plot_laws(fit, out.with_name(f"{out.stem}-laws.png"))),
    ]


def _fit_lines(fit: dict[str, object], out: Path, plots: list[str]) -> list[str]:
    """The fit as readable lines: minima per budget, laws with intervals, leave-future-out tables, plots."""
    left_out = f"; {len(fit['excluded'])} runs above --max-budget left out" if fit["excluded"] else ""
    lines = [
        f"fit of {sum(len(b['runs']) for b in fit['budgets'])} runs over {len(fit['budgets'])} budgets → {out}"
        f" (σ={fit['noise']['sigma']:.3g} from {fit['noise']['source']}{left_out})"
    ]
    lines += [
        f"  C={budget['compute']:.3g}: N_opt={budget['params_opt']:.4g} D_opt={budget['tokens_opt']:.4g}"
        f" L_opt={budget['loss_opt']:.4f} ({budget['method']})"
        for budget in fit["budgets"]
    ]
    for kind, law in fit["laws"].items():
        bounds = ", ".join(f"{name} [{low:.4g}, {high:.4g}]" for name, (low, high) in law["intervals"].items())
        title = f"{kind}-E law" if kind in ("free", "fixed") else f"fixed-E law ({kind})"
        lines.append(f"  {title}: L = {law['E']:.4g} + {law['A']:.4g}·C^-{law['alpha']:.4g}  ({bounds})")
    lines += [
        f"  {key} = {fit[key]['coefficient']:.4g}·C^{fit[key]['exponent']:.4g}" for key in ("params_opt", "tokens_opt")
    ]
    if fit["cross_validation"]:
        lines += ["  leave-future-out (predicted (actual − predicted); * interval missed):"]
        lines += [f"    {line}" for line in aligned(cross_validation_rows(fit))]
    if "stability" in fit:
        lines += [f"  prediction at C={fit['stability']['target']:.4g} from every training-set size:"]
        lines += [f"    {line}" for line in aligned(stability_rows(fit))]
    return lines + [f"  plot: {plot}" for plot in plots]


def run_predict(args: argparse.Namespace) -> int:
    """`tootsie scaling predict`."""
    result = predict(load_fit(args.fit), args.compute, args.law)
    return emit(
        result,
        args,
        f"prediction at C={args.compute:.4g} FLOPs: loss {result['loss']:.4f}"
        f" [{result['low']:.4f}, {result['high']:.4f}]",
    )


def run_preregister(args: argparse.Namespace) -> int:
    """`tootsie scaling preregister`."""
    record = preregister(args.fit, args.compute, args.name, args.out, law=args.law, note=args.note)
    prediction = record["prediction"]
    shown = (
        record
        if args.json
        else {
            "law": record["law"],
            "level": record["level"],
            "fit_sha256": record["fit"]["sha256"],
            "sha256": record["sha256"],
        }
    )
    return emit(
        shown,
        args,
        f"preregistered {args.name} at {record['created_at']}: loss {prediction['loss']:.4f}"
        f" [{prediction['low']:.4f}, {prediction['high']:.4f}] → {args.out}",
    )


def run_score(args: argparse.Namespace) -> int:
    """`tootsie scaling score`."""
    record = load_record(args.record)
    written = preregistration_time(record, args.record)
    if args.actual is not None:
        result = score(record, args.actual, "given on the command line", preregistered_at=written)
    else:
        result = score(record, *outcome_from_runs(args.runs, float(record["compute"])), preregistered_at=written)
    verdict = "inside" if result["within_interval"] else "OUTSIDE"
    return emit(
        result,
        args,
        f"{record['name']}: predicted {result['predicted']:.4f}, actual {result['actual']:.4f}"
        f" ({verdict} the interval [{result['low']:.4f}, {result['high']:.4f}])",
    )


def run_batch_size(args: argparse.Namespace) -> int:
    """`tootsie scaling batch-size`."""
    loaded = load_runs(args.runs, fields=BATCH_FIELDS, drop_nonfinite=args.drop_nonfinite)
    result = fit_batch_sizes(loaded.runs, config_from_args(args, BatchSizeConfig))
    result["dropped"] = [{"source": r.source, "loss": r["loss"]} for r in loaded.dropped]
    result["infeasible"] = infeasible_list(loaded.infeasible)
    if args.compute is not None:
        result["projection"] = {
            "compute": args.compute,
            "batch_opt": batch_at(result["optimal"], args.compute),
            "batch_critical": batch_at(result["critical"], args.compute),
        }
    if args.out:
        write_json_atomic(args.out, result)
    warn(args, *_infeasible_warnings(result["infeasible"]), *result["warnings"])
    critical = result["critical"]
    return emit(
        result,
        args,
        f"critical batch size = {critical['coefficient']:.4g}·C^{critical['exponent']:.4g}"
        f" over {len(result['budgets'])} budgets",
    )
