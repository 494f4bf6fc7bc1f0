r"""`tootsie scaling ...`: plan isoflop sweeps, fit scaling laws, predict, preregister and score predictions.

    tootsie scaling sweep --budgets 1.25e11,2.5e11,5e11,1e12 --widths 16,32,48,64,96 \
        --rule tiny --window 3 --out plan.json
    tootsie scaling fit RUNS... --out fit.json [--fixed-asymptote 1.6] [--max-budget 5e11] [--json]
    tootsie scaling predict --fit fit.json --compute 1e12 [--json]
    tootsie scaling preregister --fit fit.json --compute 1e12 --name tiny-1e12 --out prereg.json
    tootsie scaling score prereg.json --runs runs.jsonl          (or --actual LOSS)
    tootsie scaling batch-size RUNS... [--tolerance 0.01] [--compute 1e23]

Warnings (a fallback minimum, an exponent at its search bound) go to stderr
and, with `--json`, into the JSON object.
"""

import argparse
import json
import sys
from pathlib import Path

from tootsie.cli.output import build, emit
from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic
from tootsie.scaling.batch_size import BatchSizeConfig, batch_at, fit_batch_sizes
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.plots import plot_isoflops, plot_laws
from tootsie.scaling.predict import LAWS, load_fit, predict
from tootsie.scaling.preregister import load_record, outcome_from_runs, preregister, score
from tootsie.scaling.runs import BATCH_FIELDS, load_runs
from tootsie.scaling.shapes import WidthRule
from tootsie.scaling.sweep import FLOPS_RULES, SweepConfig, plan_sweep, plan_to_json

RULES = {"marin": WidthRule, "tiny": WidthRule.tiny}


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers like 1e15,3e15, got {text!r}") from None


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 256,512,768, got {text!r}") from None


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie scaling` and its subcommands."""
    scaling = subparsers.add_parser(
        "scaling", help="isoflop sweeps, scaling-law fits, predictions and preregistrations"
    )
    commands = scaling.add_subparsers(dest="scaling_command", required=True, metavar="COMMAND")

    sweep = commands.add_parser("sweep", help="plan an isoflop sweep: shapes, tokens and steps per budget")
    sweep.add_argument("--budgets", type=_floats, required=True, help="compute budgets in FLOPs, comma-separated")
    sweep.add_argument("--widths", type=_ints, required=True, help="hidden widths, comma-separated")
    sweep.add_argument(
        "--window",
        type=int,
        default=None,
        help="per budget, only this many consecutive widths around --tokens-per-param",
    )
    sweep.add_argument(
        "--tokens-per-param", type=float, default=SweepConfig.tokens_per_param, help="centre of --window (default 20)"
    )
    sweep.add_argument(
        "--rule",
        choices=sorted(RULES),
        default="marin",
        help="width rule: Marin's recipe, or 'tiny' for CPU-sized models",
    )
    sweep.add_argument("--vocab-size", type=int, default=SweepConfig.vocab_size)
    sweep.add_argument("--seq-len", type=int, default=SweepConfig.seq_len)
    sweep.add_argument("--batch-size", type=int, default=SweepConfig.batch_size, help="sequences per step")
    sweep.add_argument(
        "--flops",
        choices=FLOPS_RULES,
        default="exact",
        help="size tokens by the exact FLOPs count (attention, LM head) or by 6·N·D",
    )
    sweep.add_argument(
        "--exclude-embeddings",
        action="store_true",
        help="count parameters without embeddings (Kaplan) instead of with (Chinchilla)",
    )
    sweep.add_argument(
        "--min-steps", type=int, default=SweepConfig.min_steps, help="skip (and list) runs shorter than this"
    )
    sweep.add_argument(
        "--seeds",
        type=_ints,
        default=(0,),
        help="train every run once per seed, e.g. 1,2 for repeats that measure the loss noise (default 0)",
    )
    sweep.add_argument(
        "--out",
        metavar="PLAN.json",
        help="write the plan here (TOOTSIE_SCALING_PLAN=PLAN.json tootsie run experiments/isoflop_tiny.py runs it)",
    )
    sweep.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    sweep.set_defaults(handler=run_sweep)

    fit = commands.add_parser(
        "fit", help="fit isoflop minima, L(C) (free and fixed E), N_opt(C), D_opt(C), with intervals"
    )
    fit.add_argument(
        "runs",
        nargs="+",
        metavar="RUNS",
        help="run directories (run.json or runs.jsonl) or JSONL files with compute, params, tokens, loss",
    )
    fit.add_argument("--out", required=True, metavar="FIT.json", help="the fit file (plots go next to it)")
    fit.add_argument(
        "--fixed-asymptote",
        type=float,
        default=None,
        metavar="E",
        help="also fit L(C) with the irreducible loss fixed at E",
    )
    fit.add_argument(
        "--max-budget", type=float, default=None, metavar="C", help="leave out runs above this budget (to predict them)"
    )
    fit.add_argument(
        "--loss-noise",
        type=float,
        default=None,
        metavar="SIGMA",
        help="std of one run's loss from repeats (default: estimated)",
    )
    fit.add_argument("--bootstrap", type=int, default=FitConfig.bootstrap, help="bootstrap replicates (default 1000)")
    fit.add_argument("--level", type=float, default=FitConfig.level, help="interval probability (default 0.9)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument(
        "--drop-nonfinite",
        action="store_true",
        help="leave out runs with a NaN/inf loss (listed in the fit) instead of failing",
    )
    fit.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    fit.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    fit.set_defaults(handler=run_fit)

    predict_parser = commands.add_parser(
        "predict", help="predicted loss with an interval, and N_opt, D_opt, at a budget"
    )
    predict_parser.add_argument("--fit", required=True, metavar="FILE")
    predict_parser.add_argument("--compute", type=float, required=True, metavar="C")
    predict_parser.add_argument(
        "--law", choices=LAWS, default=None, help="default: fixed E when the fit has it, else free"
    )
    predict_parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    predict_parser.set_defaults(handler=run_predict)

    prereg = commands.add_parser("preregister", help="write a timestamped, hashed prediction record before a run")
    prereg.add_argument("--fit", required=True, metavar="FILE")
    prereg.add_argument("--compute", type=float, required=True, metavar="C")
    prereg.add_argument("--name", required=True, help="the run the prediction is for")
    prereg.add_argument("--out", required=True, metavar="RECORD.json", help="never overwritten")
    prereg.add_argument("--law", choices=LAWS, default=None)
    prereg.add_argument("--note", default="", help="free text kept in the record")
    prereg.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    prereg.set_defaults(handler=run_preregister)

    score_parser = commands.add_parser("score", help="compare a preregistered prediction with the outcome")
    score_parser.add_argument("record", metavar="RECORD.json")
    outcome = score_parser.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--actual", type=float, metavar="LOSS", help="the measured loss")
    outcome.add_argument(
        "--runs",
        nargs="+",
        metavar="RUNS",
        help="runs at the record's budget: one run, or 3+ sizes (their isoflop minimum)",
    )
    score_parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    score_parser.set_defaults(handler=run_score)

    batch = commands.add_parser(
        "batch-size", help="optimal and critical batch sizes from batch sweeps at fixed budgets, as power laws in C"
    )
    batch.add_argument(
        "runs", nargs="+", metavar="RUNS", help="JSONL files or run directories with compute, batch_size, loss"
    )
    batch.add_argument(
        "--tolerance",
        type=float,
        default=BatchSizeConfig.tolerance,
        help="relative excess loss that still counts as near-optimal (default 0.01)",
    )
    batch.add_argument(
        "--compute", type=float, default=None, metavar="C", help="also project both batch sizes to this budget"
    )
    batch.add_argument(
        "--drop-nonfinite", action="store_true", help="leave out runs with a NaN/inf loss instead of failing"
    )
    batch.add_argument("--out", metavar="FILE", help="write the result as JSON")
    batch.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    batch.set_defaults(handler=run_batch_size)


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"tootsie: warning: {warning}", file=sys.stderr)


def run_sweep(args: argparse.Namespace) -> int:
    """`tootsie scaling sweep`."""
    try:
        rule = RULES[args.rule]()
    except ValueError as error:
        raise TootsieError(str(error)) from None
    config = build(
        SweepConfig,
        budgets=args.budgets,
        widths=args.widths,
        window=args.window,
        tokens_per_param=args.tokens_per_param,
        vocab_size=args.vocab_size,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        rule=rule,
        flops_rule=args.flops,
        include_embeddings=not args.exclude_embeddings,
        min_steps=args.min_steps,
        seeds=args.seeds,
    )
    plan = plan_sweep(config)
    payload = plan_to_json(plan)
    if args.out:
        write_json_atomic(args.out, payload)
    if args.json:
        print(json.dumps(payload))
        return 0
    print(
        f"{len(plan.runs)} runs over {len(config.budgets)} budgets ({len(plan.skipped)} skipped)"
        f"{f'; plan written to {args.out}' if args.out else ''}"
    )
    print(
        f"  {'run':>14} {'layers':>6} {'heads':>5} {'params':>10} {'tokens':>10} {'steps':>6}"
        f" {'flops':>9} {'6ND':>9} {'lr':>7}"
    )
    for run in plan.runs:
        print(
            f"  {run.name:>14} {run.model.num_layers:>6} {run.model.num_heads:>5} {run.params:>10,}"
            f" {run.tokens:>10,} {run.steps:>6} {run.flops:>9.3g} {run.flops_6nd:>9.3g} {run.learning_rate:>7.2g}"
        )
    for skipped in plan.skipped:
        print(f"  skipped {skipped.budget:.3g} width {skipped.width}: {skipped.reason}")
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
        "noise": fit["noise"],
        "excluded": len(fit["excluded"]),
        "dropped": fit["dropped"],
        "warnings": fit["warnings"],
        "plots": plots,
    }


def run_fit(args: argparse.Namespace) -> int:
    """`tootsie scaling fit`."""
    config = build(
        FitConfig,
        fixed_e=args.fixed_asymptote,
        bootstrap=args.bootstrap,
        level=args.level,
        seed=args.seed,
        loss_noise=args.loss_noise,
        max_budget=args.max_budget,
    )
    fit = fit_runs(load_runs(args.runs, drop_nonfinite=args.drop_nonfinite), config)
    out = Path(args.out)
    write_json_atomic(out, fit)
    plots = (
        []
        if args.no_plots
        else [
            str(plot_isoflops(fit, out.with_name(f"{out.stem}-isoflops.png"))),
            str(plot_laws(fit, out.with_name(f"{out.stem}-laws.png"))),
        ]
    )
    _warn([f"dropped {r['source']}: loss {r['loss']}" for r in fit["dropped"]] + fit["warnings"])
    if args.json:
        print(json.dumps(_fit_summary(fit, out, plots)))
        return 0
    left_out = f"; {len(fit['excluded'])} runs above --max-budget left out" if fit["excluded"] else ""
    print(
        f"fit of {sum(len(b['runs']) for b in fit['budgets'])} runs over {len(fit['budgets'])} budgets → {out}"
        f" (σ={fit['noise']['sigma']:.3g} from {fit['noise']['source']}{left_out})"
    )
    for budget in fit["budgets"]:
        print(
            f"  C={budget['compute']:.3g}: N_opt={budget['params_opt']:.4g} D_opt={budget['tokens_opt']:.4g}"
            f" L_opt={budget['loss_opt']:.4f} ({budget['method']})"
        )
    for kind, law in fit["laws"].items():
        bounds = ", ".join(f"{name} [{low:.4g}, {high:.4g}]" for name, (low, high) in law["intervals"].items())
        print(f"  {kind}-E law: L = {law['E']:.4g} + {law['A']:.4g}·C^-{law['alpha']:.4g}  ({bounds})")
    for key in ("params_opt", "tokens_opt"):
        print(f"  {key} = {fit[key]['coefficient']:.4g}·C^{fit[key]['exponent']:.4g}")
    for check in fit["cross_validation"]:
        parts = [
            f"{kind} {check[kind]['predicted']:.4f} [{check[kind]['low']:.4f}, {check[kind]['high']:.4f}]"
            for kind in LAWS
            if kind in check
        ]
        print(
            f"  leave-future-out at C={check['compute']:.3g}: actual {check['actual']:.4f};"
            f" predicted {'; '.join(parts)}"
        )
    for plot in plots:
        print(f"  plot: {plot}")
    return 0


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
    if args.actual is not None:
        result = score(record, args.actual, "given on the command line")
    else:
        result = score(record, *outcome_from_runs(args.runs, float(record["compute"])))
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
    result = fit_batch_sizes(loaded.runs, build(BatchSizeConfig, tolerance=args.tolerance))
    result["dropped"] = [{"source": r.source, "loss": r["loss"]} for r in loaded.dropped]
    if args.compute is not None:
        result["projection"] = {
            "compute": args.compute,
            "batch_opt": batch_at(result["optimal"], args.compute),
            "batch_critical": batch_at(result["critical"], args.compute),
        }
    if args.out:
        write_json_atomic(args.out, result)
    _warn(result["warnings"])
    critical = result["critical"]
    return emit(
        result,
        args,
        f"critical batch size = {critical['coefficient']:.4g}·C^{critical['exponent']:.4g}"
        f" over {len(result['budgets'])} budgets",
    )
