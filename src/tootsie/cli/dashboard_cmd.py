"""`tootsie dashboard PREFIX_OR_RUN...`: serve the live dashboard of the training runs under the given roots."""

import argparse
import sys

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import print_json
from tootsie.errors import TootsieError


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `dashboard` command."""
    parser = subparsers.add_parser(
        "dashboard",
        help="serve a live local dashboard of training runs: loss, BPB, norms, LR, throughput, layers, rewinds",
    )
    parser.add_argument(
        "roots",
        nargs="+",
        metavar="PREFIX_OR_RUN",
        help="an executor prefix (its train steps are found) or a training output directory (tootsie train --out)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: only this machine can connect)"
    )
    parser.add_argument("--port", type=int, default=8765, help="port to bind (default %(default)s; 0 picks a free one)")
    add_output_flags(parser)
    parser.set_defaults(handler=dashboard_command)


def dashboard_command(args: argparse.Namespace) -> int:
    """`tootsie dashboard`: print the URL (with --json, `{"url", "runs", "roots"}`), then serve until interrupted."""
    from tootsie.report.dashboard.registry import RunRegistry
    from tootsie.report.dashboard.runs import root_labels
    from tootsie.report.dashboard.server import Dashboard, make_server

    labels = root_labels(args.roots)
    registry = RunRegistry(labels)
    try:
        server = make_server(registry, args.host, args.port)
    except OSError as error:
        raise TootsieError(
            f"cannot serve on {args.host}:{args.port} ({error.strerror or error}); pick another --port (0: a free one)"
        ) from None
    dashboard = Dashboard(server, None)
    runs, roots = len(registry.rows()), [str(root) for root in labels.values()]
    if args.json:
        print_json({"url": dashboard.url, "runs": runs, "roots": roots})
    elif not args.quiet:
        print(f"tootsie dashboard: {runs} runs under {', '.join(roots)}", file=sys.stderr)
        print(f"serving {dashboard.url} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        if not args.quiet:
            print("tootsie dashboard: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
