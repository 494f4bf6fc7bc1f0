"""HF export and import without transformers: files, special-token ids, sharding, round trips, refusals."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tests.release.conftest import LLAMA, make_checkpoint
from tootsie.errors import TootsieError
from tootsie.models.llama import Llama3RopeScaling
from tootsie.release.hf_chat import FROM_NOWHERE
from tootsie.release.hf_export import export_hf
from tootsie.release.hf_import import import_hf
from tootsie.release.hf_weights import INDEX_FILE, SINGLE_FILE, read_safetensors
from tootsie.train.checkpoint import read_tensors

QK = replace(
    LLAMA,
    qk_norm=True,
    tie_embeddings=True,
    head_dim=16,
    rope_scaling=Llama3RopeScaling(factor=4.0, original_max_position=16),
)


def test_export_writes_the_hf_files_with_the_tokenizers_own_ids(tmp_path) -> None:
    # Specials deliberately not at ids 0/1 and EOS before BOS: a constant or swapped id would show.
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=280,
        special_tokens=["<|pad|>", "<|eos|>", "<|bos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(["hello world"] * 10, trainer=trainer)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    bos, eos = tokenizer.token_to_id("<|bos|>"), tokenizer.token_to_id("<|eos|>")
    assert (bos, eos) == (2, 1)
    checkpoint = make_checkpoint(tmp_path / "run", LLAMA, step=10, tokens=1280)

    summary = export_hf(checkpoint, tmp_path / "hf", tokenizer=tmp_path / "tokenizer.json")

    out = tmp_path / "hf"
    assert {
        "config.json",
        "generation_config.json",
        SINGLE_FILE,
        "tokenizer.json",
        "tokenizer_config.json",
        "tootsie_export.json",
    } <= {p.name for p in out.iterdir()}
    config, generation = (
        json.loads((out / "config.json").read_text()),
        json.loads((out / "generation_config.json").read_text()),
    )
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    exported = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert (
        (config["bos_token_id"], config["eos_token_id"])
        == (generation["bos_token_id"], generation["eos_token_id"])
        == (bos, eos)
    )
    assert (
        exported.token_to_id(tokenizer_config["bos_token"]) == bos
        and exported.token_to_id(tokenizer_config["eos_token"]) == eos
    )
    assert exported.encode("hello").ids == [
        bos,
        *tokenizer.encode("hello").ids,
    ]  # BOS prepended, as in training documents
    assert summary["revision"] == "step-10-tokens-1280" and summary["weights"] == "model"
    # a run with no chat cache ships no chat template, and says so
    assert "chat_template" not in tokenizer_config and summary["chat_template"]["origin"] == FROM_NOWHERE
    assert json.loads((out / "tootsie_export.json").read_text())["chat_template"]["name"] is None
    assert (
        config["hidden_size"] == 32
        and config["num_key_value_heads"] == 2
        and config["head_dim"] == 8
        and not config["tie_word_embeddings"]
    )


def test_qk_norm_exports_as_qwen3_with_llama3_rope(tmp_path, tokenizer_file) -> None:
    export_hf(make_checkpoint(tmp_path / "run", QK), tmp_path / "hf", tokenizer=tokenizer_file)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    tensors = load_file(str(tmp_path / "hf" / SINGLE_FILE))
    assert (
        config["architectures"] == ["Qwen3ForCausalLM"] and config["head_dim"] == 16 and config["tie_word_embeddings"]
    )
    assert config["rope_scaling"] == {
        "rope_type": "llama3",
        "factor": 4.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }
    assert tensors["model.layers.1.self_attn.q_norm.weight"].shape == (16,) and "lm_head.weight" not in tensors
    assert tensors["model.layers.0.self_attn.q_proj.weight"].shape == (4 * 16, 32)


def test_sharding_past_the_size_limit_writes_an_index(tmp_path, tokenizer_file) -> None:
    checkpoint = make_checkpoint(tmp_path / "run", LLAMA)
    export_hf(checkpoint, tmp_path / "hf", tokenizer=tokenizer_file, max_shard_bytes=40_000)
    index = json.loads((tmp_path / "hf" / INDEX_FILE).read_text())
    shards = sorted(p for p in (tmp_path / "hf").iterdir() if p.name.startswith("model-"))
    assert len(shards) > 2 and not (tmp_path / "hf" / SINGLE_FILE).exists()
    tensors = {name: value for shard in shards for name, value in load_file(str(shard)).items()}
    assert set(index["weight_map"]) == set(tensors) and index["metadata"]["total_size"] == sum(
        v.nbytes for v in tensors.values()
    )
    assert all(name in load_file(str(tmp_path / "hf" / file)) for name, file in index["weight_map"].items())
    for shard in shards:
        sizes = [v.nbytes for v in load_file(str(shard)).values()]
        assert sum(sizes) <= 40_000 or len(sizes) == 1
    export_hf(checkpoint, tmp_path / "single", tokenizer=tokenizer_file)
    assert {k: v.tolist() for k, v in read_safetensors(tmp_path / "single").items()} == {
        k: v.tolist() for k, v in tensors.items()
    }


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    qk_norm=st.booleans(),
    tie=st.booleans(),
    kv_heads=st.sampled_from([1, 2, 4]),
    head_dim=st.sampled_from([None, 16]),
    ema=st.booleans(),
    shard=st.booleans(),
)
def test_export_then_import_gives_identical_parameters(
    tmp_path_factory, tokenizer_file, qk_norm, tie, kv_heads, head_dim, ema, shard
) -> None:
    root = tmp_path_factory.mktemp("roundtrip")
    config = replace(LLAMA, qk_norm=qk_norm, tie_embeddings=tie, num_kv_heads=kv_heads, head_dim=head_dim)
    checkpoint = make_checkpoint(root / "run", config, step=20, tokens=2560)
    export_hf(checkpoint, root / "hf", ema=ema, tokenizer=tokenizer_file, max_shard_bytes=30_000 if shard else 10**9)
    result = import_hf(root / "hf", root / "imported")
    original, imported = (
        read_tensors(checkpoint, "ema" if ema else "model"),
        read_tensors(result["checkpoint"], "model"),
    )
    assert sorted(original) == sorted(imported)
    assert all(np.array_equal(original[k], imported[k]) for k in original)
    state = json.loads((root / "imported" / "checkpoints" / "step-000020" / "state.json").read_text())
    assert (
        state["step"] == 20
        and state["tokens"] == 2560
        and state["model"] == json.loads((checkpoint / "state.json").read_text())["model"]
    )


def test_unexpressible_models_are_refused_with_the_feature_named(tmp_path, tokenizer_file) -> None:
    with pytest.raises(TootsieError, match="qk_norm: LlamaForCausalLM"):
        export_hf(make_checkpoint(tmp_path / "qk", QK), tmp_path / "a", tokenizer=tokenizer_file, architecture="llama")
    with pytest.raises(TootsieError, match="qk_norm: Qwen3ForCausalLM"):
        export_hf(
            make_checkpoint(tmp_path / "llama", LLAMA), tmp_path / "b", tokenizer=tokenizer_file, architecture="qwen3"
        )
    odd = replace(LLAMA, hidden_dim=34, head_dim=8)  # 34 is not divisible by 4 heads: HF LlamaConfig rejects it
    with pytest.raises(TootsieError, match="head_dim: transformers' LlamaConfig"):
        export_hf(make_checkpoint(tmp_path / "odd", odd), tmp_path / "c", tokenizer=tokenizer_file)
    checkpoint = make_checkpoint(tmp_path / "future", LLAMA)
    state = json.loads((checkpoint / "state.json").read_text())
    (checkpoint / "state.json").write_text(json.dumps({**state, "model": {**state["model"], "logit_softcap": 30.0}}))
    with pytest.raises(TootsieError, match="model feature logit_softcap=30.0 has no equivalent"):
        export_hf(checkpoint, tmp_path / "d", tokenizer=tokenizer_file)
    (checkpoint / "state.json").write_text(json.dumps({**state, "model": {**state["model"], "kind": "mamba"}}))
    with pytest.raises(
        TootsieError, match=r"state\.json does not handle model kind 'mamba'; it handles \['llama', 'moe'\]"
    ):
        export_hf(checkpoint, tmp_path / "e", tokenizer=tokenizer_file)
    assert not any((tmp_path / name).exists() for name in "abcde")


def test_bad_requests_leave_nothing_behind_and_say_why(tmp_path, tokenizer_file) -> None:
    checkpoint = make_checkpoint(tmp_path / "run", LLAMA, ema=False)
    with pytest.raises(TootsieError, match="has no ema weights"):
        export_hf(checkpoint, tmp_path / "hf", ema=True, tokenizer=tokenizer_file)
    with pytest.raises(TootsieError, match="pass --tokenizer"):
        export_hf(checkpoint, tmp_path / "hf")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(TootsieError, match="not a tootsie export"):
        export_hf(checkpoint, tmp_path / "taken", tokenizer=tokenizer_file)
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine" and not (tmp_path / "hf").exists()
    export_hf(checkpoint, tmp_path / "hf", tokenizer=tokenizer_file)
    export_hf(checkpoint, tmp_path / "hf", tokenizer=tokenizer_file)  # a previous export is replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run", "taken"]


def test_import_refuses_other_architectures_by_name(tmp_path, tokenizer_file) -> None:
    export_hf(make_checkpoint(tmp_path / "run", LLAMA), tmp_path / "hf", tokenizer=tokenizer_file)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    for change, message in (
        ({"architectures": ["MistralForCausalLM"]}, "MistralForCausalLM"),
        ({"attention_bias": True}, "attention_bias=True"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope_type 'yarn'"),
    ):
        (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(TootsieError, match=message):
            import_hf(tmp_path / "hf", tmp_path / "imported")
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(TootsieError, match=r"missing \['model.layers.2"):
        import_hf(tmp_path / "hf", tmp_path / "imported")
