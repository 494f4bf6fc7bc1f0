"""`tootsie export hf`, `tootsie import hf`, `tootsie release`: Hugging Face folders in and out, and full releases.

tootsie export hf out/demo/train/cooldown-<hash> --out hf-model [--ema] [--verify]
tootsie export hf run/checkpoints/step-000100 --out hf-step-100 --tokenizer tokenizer.json
tootsie export hf runs/sft --out hf-sft [--chat-template chatml|llama3|FILE]
tootsie import hf hf-model --out imported-run
tootsie release out --out release [--ema] [--all-checkpoints]

`--verify` needs the `hf` extra (torch, transformers), checked before the export starts.
"""

import argparse
import re
import time
from pathlib import Path

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import emit
from tootsie.datakit.chat_templates import CHAT_TEMPLATES
from tootsie.errors import TootsieError
from tootsie.release.hf_config import ARCHITECTURES
from tootsie.release.hf_export import DEFAULT_MAX_SHARD_BYTES

SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str) -> int:
    """Bytes from `5GB`, `500MB`, `2GiB` or a plain integer (transformers' `max_shard_size` spelling)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if match is None or match.group(2).upper() not in SIZE_UNITS or int(match.group(1)) <= 0:
        raise TootsieError(f"--max-shard-size {text!r}: expected a positive size like 5GB, 500MB, 2GiB or a byte count")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).upper()]


def _add_export_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="output folder (replaced if it is a previous tootsie export)"
    )
    parser.add_argument("--ema", action="store_true", help="export the EMA weights instead of the raw ones")
    parser.add_argument(
        "--tokenizer", metavar="FILE", help="tokenizer.json to ship (default: the one that made the run's token caches)"
    )
    parser.add_argument(
        "--architecture",
        choices=sorted(ARCHITECTURES),
        help="HF architecture (default: qwen3 when the model has QK-norm, else llama; "
        "for an MoE model qwen3_moe or mixtral)",
    )
    parser.add_argument(
        "--max-shard-size",
        type=parse_size,
        default=DEFAULT_MAX_SHARD_BYTES,
        metavar="SIZE",
        help=f"shard model.safetensors past this size (default {DEFAULT_MAX_SHARD_BYTES // 10**9}GB)",
    )
    parser.add_argument(
        "--chat-template",
        metavar="NAME|FILE",
        help=f"chat template to ship ({', '.join(CHAT_TEMPLATES)} or a Jinja file; default: the one the run's"
        " chat caches were tokenized with; a pretraining run ships none)",
    )
    add_output_flags(parser)


def _export_options(args: argparse.Namespace) -> dict[str, object]:
    """The options `_add_export_options` added, as `export_hf`'s and `release`'s keyword arguments."""
    return {
        "ema": args.ema,
        "tokenizer": args.tokenizer,
        "architecture": args.architecture,
        "max_shard_bytes": args.max_shard_size,
        "chat_template": args.chat_template,
    }


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie export`, `tootsie import` and `tootsie release`."""
    export = subparsers.add_parser("export", help="export a checkpoint to another format")
    export_hf_parser = export.add_subparsers(dest="export_format", required=True, metavar="FORMAT").add_parser(
        "hf", help="a Hugging Face folder (config, safetensors, tokenizer) that transformers loads"
    )
    export_hf_parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint directory, or a training output directory (its newest checkpoint)",
    )
    _add_export_options(export_hf_parser)
    export_hf_parser.add_argument(
        "--verify",
        action="store_true",
        help="load the export with transformers and compare logits and greedy tokens (needs the hf extra)",
    )
    export_hf_parser.set_defaults(handler=run_export_hf)

    importer = subparsers.add_parser("import", help="import a checkpoint from another format")
    import_hf_parser = importer.add_subparsers(dest="import_format", required=True, metavar="FORMAT").add_parser(
        "hf", help="a local Hugging Face Llama/Qwen3 folder as a tootsie checkpoint (for warm starts)"
    )
    import_hf_parser.add_argument("directory", metavar="DIR", help="local folder with config.json and safetensors")
    import_hf_parser.add_argument(
        "--out", metavar="OUT", help="training output directory to write (default: DIR-tootsie next to DIR)"
    )
    add_output_flags(import_hf_parser)
    import_hf_parser.set_defaults(handler=run_import_hf)

    release_parser = subparsers.add_parser(
        "release", help="HF folder + model card + mixture manifest + metrics history of a run"
    )
    release_parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="training output directory, checkpoint, or executor prefix (e.g. a tootsie demo --out)",
    )
    _add_export_options(release_parser)
    release_parser.add_argument(
        "--all-checkpoints",
        action="store_true",
        help="also export every earlier checkpoint as revisions/step-N-tokens-T/",
    )
    release_parser.add_argument("--name", help="model name in the card (default: the final training step's name)")
    release_parser.set_defaults(handler=run_release)


def run_export_hf(args: argparse.Namespace) -> int:
    """`tootsie export hf`."""
    from tootsie.release.checked_export import checked_export

    result = checked_export(args.checkpoint, args.out, verify=args.verify, **_export_options(args))
    chat = result["chat_template"]
    shipped = f"chat template {chat['name']} from {chat['origin']}" if chat["name"] else "no chat template"
    headline = f"exported {result['checkpoint']} as {result['architecture']} revision {result['revision']} ({shipped})"
    return emit(result, args, headline)


def run_import_hf(args: argparse.Namespace) -> int:
    """`tootsie import hf`."""
    from tootsie.release.hf_import import import_hf

    out = args.out or f"{Path(args.directory).resolve()}-tootsie"
    result = import_hf(args.directory, out)
    return emit(result, args, f"imported {args.directory} as a tootsie checkpoint at step {result['step']}")


def run_release(args: argparse.Namespace) -> int:
    """`tootsie release`."""
    from tootsie.release.release import release

    started = time.perf_counter()
    options = _export_options(args)
    result = release(args.run_dir, args.out, all_checkpoints=args.all_checkpoints, name=args.name, **options)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return emit(result, args, f"released {result['revision']} of {args.run_dir} to {result['out']}")
