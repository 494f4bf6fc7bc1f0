"""`tootsie checkpoint convert`: an old-format checkpoint (`*.safetensors`) rewritten in the sharded format.

tootsie checkpoint convert run/checkpoints/step-000100 --out new-run/checkpoints/step-000100
"""

import argparse

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import emit


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie checkpoint convert`."""
    checkpoint = subparsers.add_parser("checkpoint", help="checkpoint maintenance: convert the old format")
    convert = checkpoint.add_subparsers(dest="checkpoint_command", required=True, metavar="VERB").add_parser(
        "convert", help="rewrite an old-format checkpoint directory (model.safetensors, ...) in the sharded format"
    )
    convert.add_argument("old", metavar="OLD_STEP_DIR", help="a checkpoints/step-N directory of the old format")
    convert.add_argument(
        "--out", required=True, metavar="NEW_STEP_DIR", help="where the new checkpoint goes (a path or s3:// URL)"
    )
    add_output_flags(convert)
    convert.set_defaults(handler=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    """Convert OLD_STEP_DIR into NEW_STEP_DIR and print what it holds."""
    from tootsie.train.checkpoint import TENSORS_KEY, convert_legacy_checkpoint, read_checkpoint_state

    out = convert_legacy_checkpoint(args.old, args.out)
    state = read_checkpoint_state(out)
    result = {
        "checkpoint": str(out),
        "step": state["step"],
        "tensors": {tree: len(names) for tree, names in state[TENSORS_KEY].items()},
    }
    return emit(result, args, f"converted {args.old} to {out}")
