"""One checkpoint evaluated on the spot, not as an executor step: what `tootsie eval bpb`, `eval suite` and
`generate` run.

Each evaluation is a frozen config, whose fields are the command's flags
(`cli.options` derives them, defaults and help included), and one function
that takes it and returns the record the command prints. This module imports
the model layers (JAX, Equinox, lm-eval) inside those functions, so the CLI
reads the configs to build its parser without paying for JAX.

Example: `tootsie eval bpb --checkpoint run --data code=C1 prose=C2 --tokenizer t.json` builds
`CheckpointBPBConfig(checkpoint="run", data=("code=C1", "prose=C2"), tokenizer="t.json")` and prints
`checkpoint_bpb` of it: `{"checkpoint", "step", "weights", "bpb": {code, prose, macro_avg, micro_avg}, ...}`.
"""

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import suite_benchmarks
from tootsie.extras import require

if TYPE_CHECKING:
    from tootsie.eval.text_generation import TextGenerator


@dataclass(frozen=True)
class CheckpointBPBConfig:
    """Bits-per-byte of one checkpoint on held-out token caches, per domain and averaged."""

    checkpoint: str
    """A checkpoint, or a training output directory (its newest checkpoint)."""
    data: tuple[str, ...]
    """Held-out token caches as [NAME=]CACHE; the domain name defaults to the directory name."""
    tokenizer: str
    """The tokenizer.json the caches were made with (for byte counts)."""
    seq_len: int = 128
    """Tokens per evaluated sequence."""
    max_sequences: int | None = None
    """Sequences per domain (from the start of each cache); None for all."""
    ema: bool = False
    """Evaluate the checkpoint's EMA weights instead of the raw ones."""

    def __post_init__(self) -> None:
        if not self.data:
            raise ValueError("data is empty; name at least one held-out token cache")
        _domains(self.data)

    @property
    def weights(self) -> str:
        """Which of the checkpoint's weight trees to load: "ema" or "model"."""
        return "ema" if self.ema else "model"

    @property
    def domains(self) -> dict[str, str]:
        """Domain name → cache, from `data`."""
        return _domains(self.data)


def _domains(data: tuple[str, ...]) -> dict[str, str]:
    domains: dict[str, str] = {}
    for value in data:
        name, _, path = value.rpartition("=") if "=" in value else (Path(value).name, "", value)
        if name in domains:
            raise ValueError(f"two caches in data are both named {name!r}; pass NAME=CACHE to tell them apart")
        domains[name] = path
    return domains


def checkpoint_bpb(config: CheckpointBPBConfig) -> dict[str, Any]:
    """BPB per domain with macro and micro averages, and each domain's bytes and tokens, of the checkpoint."""
    from tootsie.eval.bpb_suite import evaluate_domains
    from tootsie.train.checkpoint import model_config_of, read_checkpoint_state
    from tootsie.train.loading import load_model, resolve_checkpoint

    checkpoint = resolve_checkpoint(config.checkpoint)
    model = load_model(model_config_of(checkpoint), str(checkpoint), weights=config.weights)
    scores = evaluate_domains(model, config.domains, config.tokenizer, config.seq_len, config.max_sequences)
    return {
        "checkpoint": str(checkpoint),
        "step": read_checkpoint_state(checkpoint)["step"],
        "weights": config.weights,
        **scores,
    }


@dataclass(frozen=True)
class SuiteEvalConfig:
    """A benchmark suite on one checkpoint, through lm-eval's task logic on local data files."""

    checkpoint: str
    """A checkpoint, or a training output directory (its newest checkpoint)."""
    suite: str
    """A suite (core, reasoning, marin-base) or benchmark names joined by commas (tootsie.eval.benchmarks)."""
    data_dir: str
    """Local copies of the benchmark data, laid out as `tootsie eval mirror` writes them."""
    limit: int | None = None
    """The first N documents of each task; None for all."""
    prompt_format: Literal["lm-eval", "olmes", "both"] = "lm-eval"
    """lm-eval's stock prompts, OLMES-style ones where a task has them, or both side by side."""
    tokenizer: str | None = None
    """The tokenizer.json; None for the one that made the run's token caches."""
    max_length: int = 128
    """Longest model input in tokens (the training sequence length); longer contexts are left-truncated."""
    batch_size: int = 8
    """Rows per forward pass (speed only)."""
    ema: bool = False
    """Evaluate the checkpoint's EMA weights instead of the raw ones."""

    @property
    def weights(self) -> str:
        """Which of the checkpoint's weight trees to load: "ema" or "model"."""
        return "ema" if self.ema else "model"

    show_prompts: int = 0
    """Rendered prompts of every task returned under "prompts" (the first N)."""

    def __post_init__(self) -> None:
        suite_benchmarks(self.suite)


def checkpoint_suite(config: SuiteEvalConfig, find_tokenizer: Callable[[str, str | None], Path]) -> dict[str, Any]:
    """`eval.suite.run_suite` on the checkpoint: `{"checkpoint", "weights", "suite", "results": [...], ...}`.

    `find_tokenizer(checkpoint, config.tokenizer)` names the tokenizer.json: the release layer's, which knows how
    a run records the tokenizer of its token caches (eval sits below release, so the caller passes it in).
    """
    require(("lmeval",), purpose="eval suite")
    if not Path(config.data_dir).is_dir():
        raise TootsieError(
            f"data_dir {config.data_dir} is not a directory; run `tootsie eval mirror {config.suite} --out DIR` first"
        )
    from tootsie.eval.lm_eval_adapter import TootsieLM
    from tootsie.eval.suite import run_suite
    from tootsie.train.loading import resolve_checkpoint

    checkpoint = resolve_checkpoint(config.checkpoint)
    lm = TootsieLM.from_checkpoint(
        str(checkpoint),
        str(find_tokenizer(str(checkpoint), config.tokenizer)),
        weights=config.weights,
        max_length=config.max_length,
        batch_size=config.batch_size,
    )
    with tempfile.TemporaryDirectory(prefix="tootsie-suite-") as work_dir:
        result = run_suite(
            lm,
            config.suite,
            config.data_dir,
            work_dir,
            prompt_format=config.prompt_format,
            limit=config.limit,
            show_prompts=config.show_prompts,
        )
    return {"checkpoint": str(checkpoint), "weights": config.weights} | result


def load_generator(
    checkpoint: str, tokenizer: str, chat_template: str | None = None, chat: bool = False
) -> "TextGenerator":
    """A text generator over the checkpoint's model; for chats with no `chat_template`, the run's own template."""
    from tootsie.eval.run_chat_template import checkpoint_chat_template
    from tootsie.eval.text_generation import TextGenerator
    from tootsie.train.checkpoint import model_config_of
    from tootsie.train.loading import load_model, resolve_checkpoint

    location = resolve_checkpoint(checkpoint)
    recorded = checkpoint_chat_template(location) if chat and chat_template is None else None
    model = load_model(model_config_of(location), str(location))
    return TextGenerator.load(model, tokenizer, chat_template, recorded and recorded.source)
