"""The model registry: which decoder a config builds, chosen in config files as `model: {kind: llama, ...}`.

A model kind is a frozen config class in `MODELS` whose `build(key=...)`
returns the Equinox module, and which counts its own parameters and training
FLOPs (`ModelConfig`), so training, MFU and the scaling sweeps never ask which
kind they hold. Loading (`tootsie.train.loading`), Hugging Face export
(`tootsie.release.hf_config.EXPORTED_KINDS`) and cached generation
(`tootsie.models.kv_cache.CACHED_DECODERS`) dispatch on the kind and refuse
one they do not handle by name (`require_kind`).

Configs and checkpoints written before the registry record a model as a
mapping without `kind:`; it is a Llama (`LEGACY_KIND`), both when a config file
is loaded (`registry_union`'s default) and when a recorded model is compared
with a new one (`recorded_model`). Executor hashes name a config's class, not
its kind, so the registry changed no step's hash.

Example: `model: {kind: llama, hidden_dim: 256, qk_norm: true}` and the older
`model: {hidden_dim: 256, qk_norm: true}` both load as
`LlamaConfig(hidden_dim=256, qk_norm=True)`, and `model: {kind: moe,
num_experts: 8}` as a `MoeConfig` (`tootsie.models.moe`).
"""

from collections.abc import Collection
from typing import Any, Protocol

import equinox as eqx
from jaxtyping import PRNGKeyArray

from tootsie.configfile import KIND_KEY, from_plain, kind_of, registry_union
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig

MODELS: dict[str, type] = {"llama": LlamaConfig, "moe": MoeConfig}
"""Model kind → its config class; a new architecture is one entry."""
LEGACY_KIND = "llama"
"""The kind of a model config recorded without `kind:` (every config and checkpoint from before the registry)."""
ModelChoice = registry_union(MODELS, default=LEGACY_KIND)
"""Any registered model config, written `{kind: NAME, ...}` in config files (no `kind:` is a Llama)."""


class ModelConfig(Protocol):
    """What every registered model config provides: a constructor and its own parameter and FLOP counts."""

    def build(self, *, key: PRNGKeyArray) -> eqx.Module:
        """A freshly initialized model of this config."""
        ...

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Parameter count, computed from the shapes (no arrays allocated)."""
        ...

    def active_parameters(self, include_embeddings: bool = True) -> int:
        """Parameters one token passes through (all of them, but in a mixture of experts)."""
        ...

    def flops_per_token(self, seq_len: int, *, recompute: bool = False, dense_attention: bool = False) -> float:
        """Training FLOPs per token at `seq_len` on active parameters (see `LlamaConfig.flops_per_token`)."""
        ...


def model_kind(config: ModelConfig) -> str:
    """The registry name of a model config (`llama`)."""
    return kind_of(config)


def model_config_from_plain(plain: Any, where: str) -> ModelConfig:
    """A model config from plain data (a `state.json`'s `model`), without `kind:` a Llama; errors name `where`."""
    if not isinstance(plain, dict):
        raise TootsieError(f"{where}: expected a mapping of model config fields, got {plain!r}")
    return from_plain(ModelChoice, plain, where)


def recorded_model(plain: dict[str, Any]) -> dict[str, Any]:
    """A plain model config as it is recorded today: its kind explicit (`LEGACY_KIND` when a record has none)."""
    return plain if not plain or KIND_KEY in plain else {KIND_KEY: LEGACY_KIND, **plain}


def require_kind(kind: str, supported: Collection[str], purpose: str) -> None:
    """Refuse a model kind that `purpose` (e.g. "Hugging Face export") does not handle, naming both."""
    if kind not in supported:
        raise TootsieError(
            f"{purpose} does not handle model kind {kind!r}; it handles {sorted(supported)} "
            f"(registered kinds: {sorted(MODELS)})"
        )
