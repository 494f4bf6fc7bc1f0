"""`tootsie export hf`, `tootsie import hf` and `tootsie release` from the command line."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.release.conftest import LLAMA, fake_run, make_checkpoint, tokenizer_file  # noqa: F401 - fixtures
from tootsie.cli.main import main
from tootsie.cli.release_cmd import parse_size
from tootsie.errors import TootsieError
from tootsie.train.checkpoint import read_tensors


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_export_then_import_on_the_command_line(tmp_path, tokenizer_file, capsys) -> None:  # noqa: F811
    checkpoint = make_checkpoint(tmp_path / "run", LLAMA, step=10, tokens=320)
    assert (
        main(
            [
                "export",
                "hf",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "hf"),
                "--tokenizer",
                str(tokenizer_file),
                "--ema",
                "--max-shard-size",
                "30KB",
                "--json",
            ]
        )
        == 0
    )
    exported = _last_json(capsys)
    assert (
        exported["revision"] == "step-10-tokens-320"
        and exported["weights"] == "ema"
        and "model.safetensors.index.json" in exported["weight_files"]
    )
    assert exported["bos_token_id"] == 0 and exported["eos_token_id"] == 1 and exported["seconds"] >= 0
    assert main(["import", "hf", str(tmp_path / "hf"), "--json"]) == 0
    imported = _last_json(capsys)
    assert (
        imported["checkpoint"] == str(tmp_path / "hf-tootsie" / "checkpoints" / "step-000010")
        and imported["step"] == 10
    )
    original, back = (
        read_tensors(checkpoint, "ema"),
        read_tensors(imported["checkpoint"], "model"),
    )
    assert all(np.array_equal(original[k], back[k]) for k in original) and sorted(original) == sorted(back)
    assert (tmp_path / "hf-tootsie" / "tokenizer.json").is_file()


def test_unexportable_requests_exit_2_with_the_feature_named(tmp_path, tokenizer_file, capsys) -> None:  # noqa: F811
    make_checkpoint(tmp_path / "run", replace(LLAMA, qk_norm=True))
    assert (
        main(
            [
                "export",
                "hf",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "hf"),
                "--tokenizer",
                str(tokenizer_file),
                "--architecture",
                "llama",
            ]
        )
        == 2
    )
    assert "qk_norm: LlamaForCausalLM has no per-head query/key RMSNorm" in capsys.readouterr().err
    assert main(["import", "hf", str(tmp_path / "nowhere")]) == 2
    assert "config.json not found" in capsys.readouterr().err
    with pytest.raises(TootsieError, match="expected a positive size"):
        parse_size("5 parsecs")
    assert parse_size("2GiB") == 2 * 2**30 and parse_size("500MB") == 500 * 10**6 and parse_size("123") == 123


def test_release_of_an_executor_prefix(fake_run, tmp_path, capsys) -> None:  # noqa: F811
    assert (
        main(["release", str(fake_run.prefix), "--out", str(tmp_path / "release"), "--name", "fake-1m", "--json"]) == 0
    )
    result = _last_json(capsys)
    assert (
        result["revision"] == "step-30-tokens-960"
        and [p["name"] for p in result["phases"]] == ["pretrain", "cooldown"]
        and result["datasets"] == 2
    )
    assert (tmp_path / "release" / "README.md").read_text().count("# Model Card for fake-1m") == 1


@pytest.mark.slow
def test_export_verify_compares_with_transformers(tmp_path, tokenizer_file, capsys) -> None:  # noqa: F811
    pytest.importorskip(
        "torch", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
    )
    pytest.importorskip(
        "transformers", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
    )
    make_checkpoint(tmp_path / "run", replace(LLAMA, qk_norm=True))
    assert (
        main(
            [
                "export",
                "hf",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "hf"),
                "--tokenizer",
                str(tokenizer_file),
                "--verify",
                "--json",
            ]
        )
        == 0
    )
    result = _last_json(capsys)
    assert (
        result["hf_class"] == "Qwen3ForCausalLM"
        and result["max_abs_logit_diff"] < 1e-4
        and result["greedy_match"] is True
    )
