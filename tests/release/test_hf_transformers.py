"""`transformers` loads the export and computes what tootsie computes: logits (fp32, < 1e-4) and greedy tokens.

Needs the `hf` extra; skipped with a reason otherwise. Both architectures are
covered: Llama (untied, plain RoPE, raw weights) and Qwen3 (QK-norm, tied,
explicit head_dim, Llama 3 RoPE scaling, EMA weights).
"""

import json
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.release.conftest import LLAMA, make_checkpoint, random_params
from tootsie.datakit.tokenizer import BOS_TOKEN, EOS_TOKEN, load_tokenizer
from tootsie.models.llama import Llama3RopeScaling
from tootsie.release.hf_export import export_hf
from tootsie.release.hf_verify import greedy_tokens

torch = pytest.importorskip(
    "torch", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
)
transformers = pytest.importorskip(
    "transformers", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
)

QK = replace(
    LLAMA,
    qk_norm=True,
    tie_embeddings=True,
    head_dim=16,
    rope_scaling=Llama3RopeScaling(factor=4.0, original_max_position=16),
)


@pytest.mark.parametrize(
    ("config", "ema", "hf_class"),
    [(LLAMA, False, "LlamaForCausalLM"), (QK, True, "Qwen3ForCausalLM")],
    ids=["llama", "qwen3-ema"],
)
def test_transformers_matches_tootsie(tmp_path, tokenizer_file, config, ema, hf_class) -> None:
    export_hf(make_checkpoint(tmp_path / "run", config, seed=0), tmp_path / "hf", ema=ema, tokenizer=tokenizer_file)
    model = jax.tree_util.tree_map(
        jnp.asarray, random_params(config, 100 if ema else 0)
    )  # the weights make_checkpoint saved
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path / "hf"), dtype=torch.float32, local_files_only=True
    ).eval()
    assert type(hf_model).__name__ == hf_class

    ids = np.random.default_rng(1).integers(0, config.vocab_size, size=(2, 24))
    with torch.no_grad():
        hf_logits = hf_model(torch.tensor(ids)).logits.numpy()
        prompt = ids[0, :8].tolist()
        hf_tokens = hf_model.generate(
            torch.tensor([prompt]),
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=hf_model.generation_config.eos_token_id,
        )[0].tolist()
    ours = np.asarray(model(jnp.asarray(ids, jnp.int32)))
    assert np.max(np.abs(ours - hf_logits)) < 1e-4
    assert greedy_tokens(model, prompt, 12, eos_id=hf_model.generation_config.eos_token_id) == hf_tokens


def test_auto_tokenizer_has_the_training_ids(tmp_path, tokenizer_file) -> None:
    export_hf(make_checkpoint(tmp_path / "run", LLAMA), tmp_path / "hf", tokenizer=tokenizer_file)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"), local_files_only=True)
    ours = load_tokenizer(tokenizer_file)
    bos, eos = ours.token_to_id(BOS_TOKEN), ours.token_to_id(EOS_TOKEN)
    assert (hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id) == (bos, eos)
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert (generation["bos_token_id"], generation["eos_token_id"]) == (bos, eos)
    text = "def f3(x):\n    return x + 3"
    assert hf_tokenizer(text).input_ids == [bos, *ours.encode(text, add_special_tokens=False).ids]
    assert hf_tokenizer.decode(hf_tokenizer(text).input_ids, skip_special_tokens=True) == text
