"""The model registry: every kind builds, jits and counts itself; old configs load as Llama; unknown kinds are refused.

The contract test runs over `MODELS`, so a new kind (MoE) is checked as soon
as it registers and names a small config in `SMALL`.
"""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.configfile import from_plain, load_config, registry_union, to_plain
from tootsie.errors import TootsieError
from tootsie.executor.hashing import canonical
from tootsie.models.kv_cache import cached_decoder
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.models.registry import MODELS, ModelChoice, model_kind, recorded_model
from tootsie.release.hf_config import choose_architecture
from tootsie.train.checkpoint import model_config_of, save_checkpoint
from tootsie.train.config import TrainConfig

SMALL = {
    "llama": LlamaConfig(
        vocab_size=61, hidden_dim=32, intermediate_dim=48, num_layers=2, num_heads=4, num_kv_heads=2, qk_norm=True
    ),
    "moe": MoeConfig(
        vocab_size=61, hidden_dim=32, intermediate_dim=16, num_layers=3, num_heads=4, num_kv_heads=2, dense_layers=1
    ),
}
"""A small config of every registered kind: the contract test's subjects."""


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_kind_builds_jits_stays_finite_and_counts_its_parameters(kind: str) -> None:
    assert kind in SMALL, f"add a small config of the model kind {kind!r} to SMALL"
    config = SMALL[kind]
    assert model_kind(config) == kind and isinstance(config, MODELS[kind])
    model = config.build(key=jax.random.PRNGKey(0))
    tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 12), 0, 61, dtype=jnp.int32)
    logits = eqx.filter_jit(lambda m, t: m(t))(model, tokens)
    assert logits.shape == (2, 12, 61) and bool(jnp.all(jnp.isfinite(logits)))
    arrays = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))
    assert sum(leaf.size for leaf in arrays) == config.num_parameters()
    assert config.num_parameters(include_embeddings=False) < config.num_parameters()
    flops = config.flops_per_token(12)
    assert config.active_parameters() <= config.num_parameters()
    assert np.isfinite(flops) and flops >= 6 * config.active_parameters(include_embeddings=False)
    assert to_plain(config)["kind"] == kind and from_plain(ModelChoice, to_plain(config), "model") == config


def _train_yaml(model: dict[str, object]) -> dict[str, object]:
    data = {"caches": {"web": "/data/web"}, "stages": [{"start_step": 0, "weights": {"web": 1.0}}], "seq_len": 8}
    return {"model": model, "data": data, "num_steps": 3}


def test_an_old_config_and_state_record_without_kind_load_as_llama(tmp_path) -> None:
    old = {"vocab_size": 61, "hidden_dim": 32, "intermediate_dim": 48, "num_heads": 4, "num_kv_heads": 2}
    config_file = tmp_path / "config.json"  # as an earlier run's config.json recorded it
    config_file.write_text(json.dumps(_train_yaml(old)), encoding="utf-8")
    loaded = load_config(config_file, TrainConfig, "train")
    assert loaded.model == LlamaConfig(**old)
    checkpoint = save_checkpoint(tmp_path / "checkpoints", 3, {"model": {"w": np.zeros(2, np.float32)}}, {"model": old})
    assert model_config_of(checkpoint) == LlamaConfig(**old)
    assert recorded_model(old) == {"kind": "llama", **old} and recorded_model(to_plain(loaded.model)) == to_plain(
        loaded.model
    )


def test_the_registry_leaves_a_model_configs_hash_as_it_was() -> None:
    """Executor hashes name a config's class, not its kind: the canonical form holds no `kind`."""
    form = canonical(SMALL["llama"], hash_of=lambda step: "")
    assert form["__type__"] == "LlamaConfig" and "kind" not in form


def test_an_unknown_kind_is_refused_naming_the_field_and_the_registered_kinds(tmp_path) -> None:
    config_file = tmp_path / "train.yaml"
    config_file.write_text(json.dumps(_train_yaml({"kind": "mamba", "hidden_dim": 32})), encoding="utf-8")
    with pytest.raises(
        TootsieError, match=r"train\.model\.kind: unknown kind 'mamba'; choose one of \['llama', 'moe'\]"
    ) as raised:
        load_config(config_file, TrainConfig, "train")
    assert "\n" not in str(raised.value)
    checkpoint = save_checkpoint(tmp_path / "checkpoints", 1, {"m": {"w": np.zeros(1, np.float32)}}, {"model": {}})
    with open(f"{checkpoint}/state.json", "w", encoding="utf-8") as handle:
        json.dump({"step": 1, "model": {"kind": "mamba"}}, handle)
    with pytest.raises(
        TootsieError, match=r"state\.json:model\.kind: unknown kind 'mamba'; choose one of \['llama', 'moe'\]"
    ):
        model_config_of(checkpoint)


@dataclass(frozen=True)
class OtherConfig:
    """A second model kind, registered only in this test's union (no export, no cached decoder)."""

    width: int = 8
    """Width."""


OTHER_KINDS = {"llama": LlamaConfig, "test_other": OtherConfig}
TwoKinds = registry_union(OTHER_KINDS, default="llama")


def test_with_two_kinds_a_mapping_without_kind_is_still_a_llama_and_a_wrong_kind_lists_both() -> None:
    assert from_plain(TwoKinds, {"hidden_dim": 64}, "model") == LlamaConfig(hidden_dim=64)
    assert from_plain(TwoKinds, {"kind": "test_other", "width": 3}, "model") == OtherConfig(3)
    with pytest.raises(
        TootsieError, match=r"model\.kind: unknown kind 'mamba'; choose one of \['llama', 'test_other'\]"
    ):
        from_plain(TwoKinds, {"kind": "mamba"}, "model")


def test_export_and_cached_generation_refuse_a_kind_they_do_not_handle_by_name() -> None:
    with pytest.raises(TootsieError, match=r"Hugging Face export does not handle model kind 'test_other'"):
        choose_architecture(OtherConfig(), None)
    with pytest.raises(TootsieError, match=r"cached generation does not handle model kind 'test_other'.*\['llama'"):
        cached_decoder(SimpleNamespace(config=OtherConfig()))
