"""`tootsie eval bpb-suite`: the in-loop evaluation's numbers on a directory of domains, caches built once."""

import json
import math
from pathlib import Path

import equinox as eqx
import jax
import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.configfile import to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.bpb_suite import build_domain_caches, recorded_tokenizer
from tootsie.eval.heldout_domains import discover_domains
from tootsie.eval.in_loop import HeldOutBPB
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.monitor.metrics_log import CONFIG_FILE
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.config import InLoopEvalConfig, TrainConfig
from tootsie.train.loading import checkpoint_root
from tootsie.train.state import TrainState

SEQ_LEN = 32


def _suite(root: Path) -> Path:
    """Three domains in the three layouts: a JSONL file, a Parquet file, and a folder of text files."""
    suite = root / "suite"
    (suite / "notes").mkdir(parents=True)
    lines = [json.dumps({"text": f"def f{i}(x):\n    return x * {i} + {i % 7}\n"}) for i in range(40)]
    (suite / "code.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    prose = [f"The {w} sat on the mat number {i}, and it was café time." for i, w in enumerate(["cat", "dog"] * 15)]
    write_table_atomic(pa.table({"text": prose}), suite / "prose.parquet")
    for i in range(3):
        (suite / "notes" / f"n{i}.txt").write_text(f"Note {i}: remember to water plant {i}.\n" * 6, encoding="utf-8")
    return suite


def _tokenizer(root: Path, suite: Path) -> str:
    texts = [line for line in (suite / "code.jsonl").read_text().splitlines()] + ["The cat sat on the mat café"] * 20
    write_table_atomic(pa.table({"text": texts}), root / "tokdocs" / "part-00000.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "tokdocs"),), vocab_size=300), str(root / "tok"))
    return str(root / "tok" / "tokenizer.json")


def _suite_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["eval", "bpb-suite", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bpb_suite_equals_the_in_loop_eval_and_reuses_its_caches(tmp_path, capsys) -> None:
    suite = _suite(tmp_path)
    tokenizer = _tokenizer(tmp_path, suite)
    prefix = str(tmp_path / "prefix")
    caches = build_domain_caches(str(suite), tokenizer, prefix)
    assert sorted(caches) == ["code", "notes", "prose"] and all(c["built"] for c in caches.values())
    config = TrainConfig(
        model=LlamaConfig(
            vocab_size=300, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1
        ),
        data=MixtureConfig(
            caches={"code": caches["code"]["path"]},
            stages=(MixtureStage(0, {"code": 1.0}),),
            seq_len=SEQ_LEN,
            batch_schedule=BatchSchedule.constant(4),
        ),
        num_steps=3,
        eval=InLoopEvalConfig(
            heldout={name: c["path"] for name, c in caches.items()}, tokenizer=tokenizer, max_sequences=None
        ),
    )
    # a run directory as the trainer leaves it: config.json and a committed checkpoint at the last step
    model = LlamaModel(config.model, key=jax.random.PRNGKey(3))
    write_json_atomic(tmp_path / "run" / CONFIG_FILE, to_plain(config))
    record = {"model": to_plain(config.model), "kind": "permanent", "tokens": 0, "data_step": 3}
    save_checkpoint(checkpoint_root(tmp_path / "run"), 3, {"model": eqx.filter(model, eqx.is_array)}, record)
    in_loop = HeldOutBPB(config).scores(TrainState(model=model, opt_state=None, ema=None, step=3))

    # tokenizer and seq_len come from the run's recorded config; the caches are the ones built above
    result = _suite_json(capsys, "--checkpoint", str(tmp_path / "run"), "--suite", str(suite), "--prefix", prefix)

    assert result["step"] == 3 and result["seq_len"] == SEQ_LEN and result["layout"] == "folders"
    assert set(result["bpb"]) == {"code", "notes", "prose", "macro_avg", "micro_avg"}
    for key, value in result["bpb"].items():
        assert math.isclose(value, in_loop[f"eval/bpb/{key}"], rel_tol=1e-6), key
    assert not any(c["built"] for c in result["caches"].values())
    assert {name: c["path"] for name, c in result["caches"].items()} == {n: c["path"] for n, c in caches.items()}
    assert result["bytes"]["notes"] > 0 and result["bpb"]["macro_avg"] != result["bpb"]["micro_avg"]

    # an edited domain file gets a new cache; the others are reused
    (suite / "notes" / "n0.txt").write_text("An edited note.\n", encoding="utf-8")
    edited = _suite_json(
        capsys,
        "--checkpoint",
        str(tmp_path / "run"),
        "--suite",
        str(suite),
        "--prefix",
        prefix,
        "--tokenizer",
        tokenizer,
    )
    assert edited["caches"]["notes"]["built"] and edited["caches"]["notes"]["path"] != caches["notes"]["path"]
    assert not edited["caches"]["code"]["built"] and not edited["caches"]["prose"]["built"]
    assert edited["bpb"]["code"] == result["bpb"]["code"] and edited["bpb"]["notes"] != result["bpb"]["notes"]


def test_empty_suite_and_unreadable_domains_are_clear_errors(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TootsieError, match="holds no domains"):
        discover_domains(tmp_path / "empty")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "table.csv").write_text("a,b\n")
    with pytest.raises(TootsieError, match="table.csv is not a domain"):
        discover_domains(tmp_path / "odd")
    suite = _suite(tmp_path)
    tokenizer = _tokenizer(tmp_path, suite)
    (suite / "broken.txt").write_bytes(b"\xff\xfe not utf-8 \xc3")
    with pytest.raises(TootsieError, match=r"broken.*unreadable record.*invalid_utf8"):
        build_domain_caches(str(suite), tokenizer, str(tmp_path / "prefix"))
    (suite / "broken.txt").unlink()
    (suite / "bad.parquet").write_bytes(b"not parquet at all")
    assert (
        main(
            [
                "eval",
                "bpb-suite",
                "--checkpoint",
                str(tmp_path),
                "--suite",
                str(suite),
                "--tokenizer",
                tokenizer,
                "--prefix",
                str(tmp_path / "prefix"),
            ]
        )
        == 2
    )
    assert "domain 'bad': cannot read" in capsys.readouterr().err


def test_a_step_runs_tokenizer_recorded_relative_to_its_prefix_is_found(tmp_path: Path) -> None:
    run = tmp_path / "prefix" / "demo" / "train" / "sft-abc123"
    (run / "checkpoints" / "step-3").mkdir(parents=True)
    (run / ".executor_info.json").write_text(json.dumps({"name": "demo/train/sft", "hash": "abc123"}))
    (run / "config.json").write_text(json.dumps({"eval": {"tokenizer": "demo/tokenizer-9f/tokenizer.json"}}))
    found = recorded_tokenizer(str(run / "checkpoints" / "step-3"))
    assert found == str(tmp_path / "prefix" / "demo" / "tokenizer-9f" / "tokenizer.json")
    (run / "config.json").write_text(json.dumps({"eval": {"tokenizer": "/abs/tokenizer.json"}}))  # by hand: as given
    assert recorded_tokenizer(str(run)) == "/abs/tokenizer.json"
