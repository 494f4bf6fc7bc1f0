"""`tootsie plan memory`: will a training config fit its devices? Bytes per device, before launch.

    tootsie plan memory --config run.yaml [--devices N] [--mesh data=..,expert=..,fsdp=..,tensor=..] \
        [--device-kind h100|h200|a100|v5p|cpu] [--json]
    tootsie plan memory --model 8b --seq-len 4096 --batch-size 256 --mesh fsdp=8 --device-kind h100 --json
    tootsie plan memory --model moe-1e23 --seq-len 4096 --batch-size 2048 --mesh data=4,expert=4,fsdp=32 --no-compile

`--model` takes a preset name (`tootsie.models.presets`; `8b` and `32b` mean
`marin-8b` and `marin-32b`). The planner is `tootsie.train.memory_plan`. The
JSON has `params_total` and `params_active` (they differ for an MoE: memory
holds every expert, a token passes through k of them).
"""

import argparse
import math
from dataclasses import replace

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import print_json, say
from tootsie.configfile import load_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.models.presets import PRESETS
from tootsie.train.config import COMPUTE_DTYPES, TrainConfig
from tootsie.train.memory_plan import DEVICE_KINDS, GIB, PARTS, MemoryPlan, parse_mesh, plan_memory


def _preset(name: str) -> str:
    """The preset `name` means: itself, or `marin-<name>` (so `8b` is the Marin 8B shape)."""
    for candidate in (name, f"marin-{name}"):
        if candidate in PRESETS:
            return candidate
    raise TootsieError(f"--model {name!r} is no preset; choose one of {sorted(PRESETS)} (or 8b, 32b)")


def _config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig to plan: the file's, or a preset with the given shape (no data is read either way)."""
    if (args.config is None) == (args.model is None):
        raise TootsieError("give either --config CFG.yaml or --model PRESET --seq-len L --batch-size B")
    if args.config is not None:
        config = load_config(args.config, TrainConfig, root="train")
    else:
        if args.seq_len is None or args.batch_size is None:
            raise TootsieError("--model needs --seq-len and --batch-size")
        data = MixtureConfig(
            caches={"unused": "unused"},
            stages=(MixtureStage(0, {"unused": 1.0}),),
            seq_len=args.seq_len,
            batch_schedule=BatchSchedule.constant(args.batch_size),
        )
        config = TrainConfig(model=PRESETS[_preset(args.model)], data=data, num_steps=1)
    changes = {"mesh": parse_mesh(args.mesh)} if args.mesh else {}
    changes |= {"compute_dtype": args.compute_dtype} if args.compute_dtype else {}
    try:
        return replace(config, **changes)
    except ValueError as error:
        raise TootsieError(str(error)) from None


def _devices(args: argparse.Namespace, config: TrainConfig) -> int:
    """`--devices`, else the product of an explicit mesh."""
    if args.devices is not None:
        return args.devices
    sizes = (config.mesh.data, config.mesh.expert, config.mesh.fsdp, config.mesh.tensor)
    if -1 in sizes:
        raise TootsieError(f"the mesh {config.mesh} leaves an axis at -1; give --devices N or every axis a size")
    return math.prod(sizes)


def _table(plan: MemoryPlan) -> str:
    """The plan as a readable table in GiB."""
    lines = [f"memory per device on {plan.device_kind}, mesh {plan.mesh}:"]
    lines.append(f"  {'parameters':<12} {plan.params_total:,} total, {plan.params_active:,} active")
    lines += [f"  {part:<12} {plan.per_device[part] / GIB:10.2f} GiB" for part in (*PARTS, "total")]
    lines.append(f"  {'device':<12} {plan.device_bytes / GIB:10.2f} GiB: {'fits' if plan.fits else 'does NOT fit'}")
    return "\n".join(lines + [f"  note: {note}" for note in plan.notes])


def plan_memory_command(args: argparse.Namespace) -> int:
    """Plan, then print the JSON object or the table."""
    config = _config(args)
    plan = plan_memory(config, _devices(args, config), args.device_kind, compile_step=not args.no_compile)
    if args.json:
        print_json(plan.to_json())
    else:
        say(args, _table(plan))
    return 0


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie plan memory`."""
    plan = subparsers.add_parser("plan", help="plan a run before launching it (memory per device)")
    commands = plan.add_subparsers(dest="plan_command", required=True, metavar="COMMAND")
    memory = commands.add_parser("memory", help="bytes per device of a training step, and whether it fits")
    memory.add_argument("--config", help="a training config file (YAML/JSON with a train: root)")
    memory.add_argument("--model", help="a model preset instead of --config (8b, 32b, 1b, 125m, tiny, ...)")
    memory.add_argument("--seq-len", type=int, help="tokens per sequence (with --model)")
    memory.add_argument("--batch-size", type=int, help="global sequences per step (with --model)")
    memory.add_argument("--devices", type=int, help="device count (default: the product of the mesh's axes)")
    memory.add_argument("--mesh", help="data=..,expert=..,fsdp=..,tensor=.. (overrides the config's mesh)")
    memory.add_argument("--device-kind", default="h100", help=f"one of {', '.join(DEVICE_KINDS)} (default h100)")
    memory.add_argument("--compute-dtype", choices=COMPUTE_DTYPES, help="override the config's compute dtype")
    memory.add_argument("--no-compile", action="store_true", help="analytic only: skip XLA's compiled analysis")
    add_output_flags(memory)
    memory.set_defaults(handler=plan_memory_command)
