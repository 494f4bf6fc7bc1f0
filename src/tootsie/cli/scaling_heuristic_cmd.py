r"""`tootsie scaling heuristic`: the recipe (model, optimizer, batch, steps) for a compute budget and a hidden width.

    tootsie scaling heuristic --budget 1e23 --hidden-dim 5120 --moe --experts 64 --k 4 --json
    tootsie scaling heuristic --budget 1e12 --hidden-dim 64 --moe --experts 8 --k 2 \
        --rule tiny-gqa --vocab-size 4096 --seq-len 128 --batch-size 16

The flags are `Heuristic`'s fields (`scaling.heuristic`, which marks every
default as from the seeds or NOT IN SEEDS); `--moe` with `MoeShape`'s
(`--experts`, `--k`, ...) makes the model a mixture of experts, and the
`--beta2-*` flags set the β₂ rule. `scaling sweep` takes the same MoE and
β₂ flags (`add_moe_flags`, `moe_fields`). `--json` prints
`{"model", "optimizer": {"lr", "beta1", "beta2", ...}, "batch_size", "steps",
"tokens", "params_total", "params_active", ...}`.
"""

import argparse
from typing import Any

from tootsie.cli.options import add_config_flags, config_from_args, given_fields
from tootsie.cli.output import emit
from tootsie.errors import TootsieError
from tootsie.scaling.heuristic import FLOPS_RULES, Beta2Rule, Heuristic, MoeShape
from tootsie.scaling.shapes import WIDTH_RULES

Commands = "argparse._SubParsersAction[argparse.ArgumentParser]"
MOE_RENAMES = {"num_experts": "experts", "experts_per_token": "k"}
"""`MoeShape` fields spelled as the issue's flags (`--experts E --k K`)."""
BETA2_RENAMES = {name: f"beta2_{name}" for name in ("base", "reference_batch", "low", "high")}
"""`Beta2Rule` fields as `--beta2-base` etc."""


def add_moe_flags(parser: argparse.ArgumentParser) -> None:
    """`--moe` and `MoeShape`'s flags, and the β₂ rule's `--beta2-*` flags."""
    parser.add_argument(
        "--moe", action="store_true", help="experts in every block, Adam β₁ 0.9062 and the β₂ rule (the heuristic's)"
    )
    add_config_flags(parser, MoeShape, renames=MOE_RENAMES)
    add_config_flags(parser, Beta2Rule, renames=BETA2_RENAMES)


def moe_fields(args: argparse.Namespace) -> dict[str, Any]:
    """`moe`, and the β's `--moe` implies, for a sweep or heuristic config; MoE flags without `--moe` are refused."""
    shape_flags = given_fields(args, MoeShape)
    if shape_flags and not args.moe:
        flags = ", ".join(f"--{MOE_RENAMES.get(name, name).replace('_', '-')}" for name in shape_flags)
        raise TootsieError(f"{flags} shape the experts: add --moe")
    fields: dict[str, Any] = {}
    if args.moe:
        fields["moe"] = config_from_args(args, MoeShape)
        if getattr(args, "beta1", None) is None:
            fields["beta1"] = Heuristic.beta1
    if args.moe or given_fields(args, Beta2Rule):
        fields["beta2"] = config_from_args(args, Beta2Rule)
    return fields


def register_heuristic(commands: Commands) -> argparse.ArgumentParser:
    """Add `tootsie scaling heuristic`."""
    parser = commands.add_parser("heuristic", help="the recipe (model, optimizer, batch, steps) for a budget and width")
    parser.add_argument("--budget", type=float, required=True, metavar="C", help="compute budget in FLOPs")
    parser.add_argument("--hidden-dim", type=int, required=True, metavar="D", help="the model's hidden width")
    parser.add_argument(
        "--rule",
        choices=sorted(WIDTH_RULES),
        default="marin-gqa4",
        help="width rule: depth and heads from the width (default: Marin's, GQA 4:1 as the seeds' MoE v16)",
    )
    add_config_flags(
        parser, Heuristic, exclude=("rule", "moe", "beta2", "batch_rule"), choices={"flops_rule": FLOPS_RULES}
    )
    add_moe_flags(parser)
    parser.set_defaults(handler=run_heuristic)
    return parser


def run_heuristic(args: argparse.Namespace) -> int:
    """`tootsie scaling heuristic`: one recipe as JSON or as a summary."""
    heuristic = config_from_args(args, Heuristic, rule=WIDTH_RULES[args.rule](), **moe_fields(args))
    try:
        recipe = heuristic.recipe(args.budget, args.hidden_dim)
    except ValueError as error:
        raise TootsieError(f"scaling heuristic: {error}") from None
    result, model = recipe.to_json(), recipe.model
    shown = {key: result[key] for key in ("batch_size", "steps", "tokens", "params_total", "params_active")}
    return emit(
        result if args.json else shown | {key: result["optimizer"][key] for key in ("lr", "beta1", "beta2")},
        args,
        f"C={args.budget:.3g} d{args.hidden_dim}: {model.num_layers} layers, {model.num_heads} heads"
        f" ({model.num_kv_heads} KV), {result['params_active']:,} active of {result['params_total']:,} parameters",
    )
