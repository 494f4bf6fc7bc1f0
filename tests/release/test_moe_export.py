"""An MoE checkpoint exports as Mixtral or Qwen3-MoE: transformers computes tootsie's logits (fp32, < 1e-4) and
its greedy tokens, and a feature neither class can express is refused with the field named.

The weights are random draws off the init (every norm off 1, router logits spread), as for the Llama parity
tests; tootsie's tokens come from its KV-cache generator, as `tootsie generate` would produce them.
"""

import json
from dataclasses import fields, replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.release.conftest import LLAMA, make_checkpoint, random_params
from tootsie.errors import TootsieError
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.release.hf_config import choose_architecture
from tootsie.release.hf_export import export_hf
from tootsie.release.hf_import import import_hf
from tootsie.release.model_card import architecture_section
from tootsie.train.checkpoint import read_tensors
from tootsie.train.loading import model_config_of

MIXTRAL = MoeConfig(
    **{f.name: getattr(LLAMA, f.name) for f in fields(LlamaConfig)} | {"intermediate_dim": 16},
    num_experts=4,
    experts_per_token=2,
    capacity_factor=1.0,
)
QWEN3_MOE = replace(
    MIXTRAL,
    num_layers=3,
    qk_norm=True,
    tie_embeddings=True,
    head_dim=16,
    rope_scaling=Llama3RopeScaling(factor=4.0, original_max_position=16),
    dense_layers=1,
    dense_intermediate_dim=48,
    router_weights="softmax",
    capacity_factor=1.25,
)


def test_moe_refusals_name_the_field() -> None:
    for config in (replace(MIXTRAL, num_shared_experts=1), replace(QWEN3_MOE, num_shared_experts=1)):
        with pytest.raises(TootsieError, match=r"num_shared_experts: (Mixtral|Qwen3Moe)ForCausalLM has no"):
            choose_architecture(config, None)
    with pytest.raises(TootsieError, match="dense_layers: MixtralForCausalLM has experts in every layer"):
        choose_architecture(replace(MIXTRAL, dense_layers=1), None)
    with pytest.raises(TootsieError, match="router_weights: MixtralForCausalLM always renormalizes"):
        choose_architecture(replace(MIXTRAL, router_weights="softmax"), None)
    with pytest.raises(TootsieError, match="qk_norm: Qwen3MoeForCausalLM always normalizes"):
        choose_architecture(MIXTRAL, "qwen3_moe")
    with pytest.raises(TootsieError, match="architecture 'llama' cannot express a 'moe' model"):
        choose_architecture(MIXTRAL, "llama")
    with pytest.raises(TootsieError, match="architecture 'mixtral' cannot express a 'llama' model"):
        choose_architecture(LLAMA, "mixtral")


def test_model_card_lists_experts_k_capacity_and_active_parameters() -> None:
    card = architecture_section(QWEN3_MOE, {"architecture": "Qwen3MoeForCausalLM"})
    for row in (
        f"| Parameters (total) | {QWEN3_MOE.num_parameters():,} (",
        f"| Active parameters per token | {QWEN3_MOE.active_parameters():,} (",
        "| Experts per MoE layer | 4 |",
        "| Experts per token (k) | 2 |",
        "| Leading dense layers | 1 (feedforward size 48) |",
        "| Capacity factor (training) | 1.25; inference (and transformers) route dropless |",
    ):
        assert row in card


def test_refused_export_writes_nothing(tmp_path, tokenizer_file) -> None:
    checkpoint = make_checkpoint(tmp_path / "run", replace(MIXTRAL, num_shared_experts=1), ema=False)
    with pytest.raises(TootsieError, match="num_shared_experts"):
        export_hf(checkpoint, tmp_path / "hf", tokenizer=tokenizer_file)
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("config", [MIXTRAL, QWEN3_MOE], ids=["mixtral", "qwen3_moe"])
def test_import_restores_the_exported_moe(tmp_path, tokenizer_file, config) -> None:
    checkpoint = make_checkpoint(tmp_path / "run", config, ema=False)
    export_hf(checkpoint, tmp_path / "hf", tokenizer=tokenizer_file)
    imported = import_hf(tmp_path / "hf", tmp_path / "imported")["checkpoint"]
    assert model_config_of(imported) == replace(config, capacity_factor=None)  # transformers routes dropless
    original, restored = read_tensors(checkpoint, "model"), read_tensors(imported, "model")
    assert original.keys() == restored.keys() and all(np.array_equal(original[k], restored[k]) for k in original)


HF_EXTRA = "the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"


@pytest.mark.parametrize(
    ("config", "hf_class"),
    [(MIXTRAL, "MixtralForCausalLM"), (QWEN3_MOE, "Qwen3MoeForCausalLM")],
    ids=["mixtral", "qwen3_moe"],
)
def test_transformers_matches_tootsie_moe(tmp_path, tokenizer_file, config, hf_class) -> None:
    torch = pytest.importorskip("torch", reason=HF_EXTRA)  # here, so the tests above run without the extra
    transformers = pytest.importorskip("transformers", reason=HF_EXTRA)
    export_hf(make_checkpoint(tmp_path / "run", config, seed=0, ema=False), tmp_path / "hf", tokenizer=tokenizer_file)
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["num_experts_per_tok"] == 2 and written.get("mlp_only_layers", []) == list(
        range(config.dense_layers)
    )
    model = jax.tree_util.tree_map(jnp.asarray, random_params(config, 0))  # the weights make_checkpoint saved
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path / "hf"), dtype=torch.float32, local_files_only=True
    ).eval()
    assert type(hf_model).__name__ == hf_class

    ids = np.random.default_rng(1).integers(0, config.vocab_size, size=(2, 24))
    prompt = ids[0, :8].tolist()
    with torch.no_grad():
        hf_logits = hf_model(torch.tensor(ids)).logits.numpy()
        hf_tokens = hf_model.generate(
            torch.tensor([prompt]), max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0
        )[0, len(prompt) :].tolist()
    ours = np.asarray(jax.jit(lambda m, x: m(x))(model, jnp.asarray(ids, jnp.int32)))
    assert np.max(np.abs(ours - hf_logits)) < 1e-4
    (generation,) = generate(model, [prompt], SamplingConfig(max_new_tokens=12))
    assert list(generation.tokens) == hf_tokens
