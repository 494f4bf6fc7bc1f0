"""`tootsie demo`: the whole flow on text from this machine, as the README's main job.

Runs the demo's steps (`tootsie.demos.stdlib_demo`, shipped in the package, so
any install runs it from any directory) through the executor (so a second run
skips every finished step), then prints per-step times, held-out bits-per-byte
before and after training, peak memory, and where every artifact is. `--tiny`
runs the test-size copy (every step, seconds of training); `--experiment FILE`
runs another demo file instead. `--backend ray` runs the steps as Ray tasks,
and `--out s3://bucket/demo` (or `--prefix`) keeps every output in object
storage (docs/scale-out.md). `tootsie demo verify` (the old `demo --verify`
too) then reruns every step of the demo into a scratch directory and checks
that each writes the same bytes as recorded (`tootsie verify`); the command
fails if any step differs. The demo's modules (JAX) are imported only when it
runs.

Before anything runs, the command checks the extras it needs: `demo` for the
shipped demo's web steps, `ray` for `--backend ray`, `s3` for an s3:// prefix.
A missing one is one line naming `pip install "tootsie[EXTRA]"`, and no step
directory is made.
"""

import argparse
import resource
import sys
import time
from pathlib import Path

from tootsie import storage
from tootsie.cli.executor_cmd import add_backend_arguments, progress_lines
from tootsie.cli.options import add_output_flags, rewrite_mode_flags
from tootsie.cli.output import print_json, quiet_progress, say
from tootsie.cli.verify_cmd import print_report as print_verify_report
from tootsie.errors import TootsieError
from tootsie.executor import RunReport, failure_summary, load_experiment, run_experiment
from tootsie.executor.verify import VerifyReport, verify_experiment
from tootsie.extras import require, require_for_urls
from tootsie.monitor.metrics_log import METRICS_FILE

DEFAULT_OUT = "./tootsie-demo"
BPB_LABEL_ORDER = {"init": 0, "pretrain": 1, "pretrain_ema": 2, "final": 3, "final_ema": 4}


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `demo` and `demo verify` (the same options; flags given before `verify` count too)."""
    parser = subparsers.add_parser("demo", help="run the end-to-end demo (no network, a few minutes on 2 CPU cores)")
    _add_demo_arguments(parser)
    modes = parser.add_subparsers(dest="demo_mode", metavar="MODE")
    verify = modes.add_parser(
        "verify",
        help="the demo, then every step rerun into scratch and checked to write the same bytes (as tootsie verify)",
    )
    _add_demo_arguments(verify)
    for action in verify._actions:  # unset flags leave what `demo` before the verb parsed
        action.default = argparse.SUPPRESS
    for command in (parser, verify):
        command.set_defaults(handler=demo_command)


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        "--prefix",
        dest="out",
        default=DEFAULT_OUT,
        metavar="DIR_OR_URL",
        help=f"output prefix: a directory or a URL like s3://bucket/demo (default {DEFAULT_OUT})",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--experiment", metavar="FILE", help="demo experiment file (default: the demo shipped in the package)"
    )
    which.add_argument(
        "--tiny", action="store_true", help="the demo at test size: every step, a 2-layer model, ~40 s on 2 CPU cores"
    )
    add_backend_arguments(parser)
    add_output_flags(parser)


def rewrite_aliases(argv: list[str]) -> list[str]:
    """The old shape `demo --verify ...` is `demo verify ...`."""
    return rewrite_mode_flags(argv, ("demo",), {"--verify": ("demo", "verify")})


def demo_command(args: argparse.Namespace) -> int:
    """Run the demo (then, for `demo verify`, rerun and compare every step), print its summary; 0 when all is well."""
    started = time.perf_counter()
    verify = args.demo_mode == "verify"
    require_demo_extras(args, verify=verify)
    experiment, steps = _demo_steps(args)
    with progress_lines(enabled=not args.quiet), quiet_progress(args):
        report = run_experiment(
            steps, args.out, experiment_path=experiment, backend=args.backend, ray_address=args.ray_address
        )
    summary = demo_summary(report, wall_seconds=time.perf_counter() - started)
    verified = None
    if verify and report.ok:
        with progress_lines(enabled=not args.quiet), quiet_progress(args):
            verified = verify_experiment(steps, args.out)
        summary["verify"] = verified.to_json()
    if args.json:
        print_json(summary)
    elif not args.quiet:
        print_summary(summary)
        if verified is not None:
            say(args, "")
            print_verify_report(verified)
    failure = failure_summary(report)
    if failure is not None:
        print(f"tootsie: {failure}", file=sys.stderr)
    if verified is not None and not verified.ok:
        print(f"tootsie: the demo is not reproducible: {_differing(verified)}", file=sys.stderr)
    return 0 if report.ok and (verified is None or verified.ok) else 1


def _demo_steps(args: argparse.Namespace) -> tuple[Path, list]:
    """The experiment file and steps: --experiment's, or the shipped demo's (--tiny: at test size)."""
    if args.experiment:
        return Path(args.experiment), load_experiment(args.experiment)
    from tootsie.demos import stdlib_demo  # builds models and training steps: JAX, only when the demo runs

    return Path(stdlib_demo.__file__), stdlib_demo.build_steps(
        stdlib_demo.TINY if args.tiny else stdlib_demo.DemoSettings()
    )


def _differing(report: VerifyReport) -> str:
    """One line naming the steps whose rerun differs or failed, and their files."""
    parts = [f"{step.name} ({', '.join(step.differing) or step.error})" for step in report.steps if step.differs]
    return "; ".join(parts) or "no step was rerun"


def require_demo_extras(args: argparse.Namespace, *, verify: bool) -> None:
    """Raise MissingExtra before anything runs when an extra the demo's options need is not installed."""
    extras = [] if args.experiment else ["demo"]  # another demo file's steps declare their own
    if args.backend == "ray":
        extras.append("ray")
    require(extras, purpose="the demo")
    require_for_urls((args.out,), purpose="the demo's prefix")
    if verify and storage.is_remote(args.out):
        raise TootsieError(f"demo verify needs a local prefix, not {args.out}; run the demo into a local directory")


def _output_of(report: RunReport, name: str) -> str | None:
    """The output directory (path or URL) of the step `name`, None when the report has no such step."""
    matches = [step.output_path for step in report.steps if step.name == name]
    return matches[0] if matches else None


def _artifact(directory: str | None, name: str) -> str | None:
    """`directory`/`name` (joined for a path or a URL), None without a directory."""
    return storage.join(directory, name) if directory else None


def demo_summary(report: RunReport, wall_seconds: float) -> dict[str, object]:
    """Times, BPB, memory and artifact paths (local paths or URLs) of a demo run, JSON-ready."""
    from tootsie.eval.bpb_step import BPB_FILE  # the writers' names; imported when the demo has run
    from tootsie.report.run_report import REPORT_FILE
    from tootsie.report.run_summary import LOSS_PLOT_FILE, SUMMARY_FILE

    summary_dir = _output_of(report, "demo/summary")
    bpb_file = _artifact(_output_of(report, "demo/eval/bpb"), BPB_FILE)
    bpb = storage.read_json(bpb_file) if bpb_file else None
    return {
        "ok": report.ok,
        "prefix": report.prefix,
        "wall_seconds": round(wall_seconds, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "steps": [
            {"name": s.name, "status": str(s.status), "seconds": s.seconds, "ran": s.reason.startswith("run")}
            for s in report.steps
        ],
        "bpb": bpb,
        "artifacts": {
            "metrics": _artifact(summary_dir, METRICS_FILE),
            "loss_plot": _artifact(summary_dir, LOSS_PLOT_FILE),
            "summary": _artifact(summary_dir, SUMMARY_FILE),
            "report": _artifact(summary_dir, REPORT_FILE),
            "bpb": bpb_file,
            "final_checkpoints": _output_of(report, "demo/train/cooldown") or "",
            "tokenizer": _output_of(report, "demo/tokenizer") or "",
        },
    }


def print_summary(summary: dict[str, object]) -> None:
    """The human-readable demo summary."""
    print(
        f"\ntootsie demo: {'done' if summary['ok'] else 'FAILED'} in {summary['wall_seconds']:.1f} s,"
        f" peak RSS {summary['peak_rss_mb']:.0f} MB"
    )
    print(f"outputs under {summary['prefix']}\n")
    for step in summary["steps"]:
        seconds = f"{step['seconds']:.1f} s" if step["seconds"] is not None else "-"
        print(f"  {step['status']:<11} {'ran    ' if step['ran'] else 'skipped'} {seconds:>9}  {step['name']}")
    bpb = summary["bpb"]
    if bpb:
        domains = [name for name in bpb["init"] if name not in ("macro_avg", "micro_avg")] + ["macro_avg"]
        print("\nheld-out bits per byte (lower is better):")
        print("  " + f"{'':<12}" + "".join(f"{d:>11}" for d in domains))
        for label, values in sorted(bpb.items(), key=lambda item: BPB_LABEL_ORDER.get(item[0], len(BPB_LABEL_ORDER))):
            print("  " + f"{label:<12}" + "".join(f"{values[d]:>11.3f}" for d in domains))
    print("\nartifacts:")
    for name, path in summary["artifacts"].items():
        print(f"  {name:<18} {path}")
