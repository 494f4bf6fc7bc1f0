"""`tootsie eval bpb-suite`: the in-loop evaluation's numbers on a directory of domains, caches built once."""

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.bpb_suite import build_domain_caches
from tootsie.eval.heldout_domains import discover_domains
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import InLoopEvalConfig, TrainConfig
from tootsie.train.schedule import LinearScheduleConfig

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


@pytest.mark.slow
@pytest.mark.timeout(240)
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
        schedule=LinearScheduleConfig(peak_lr=1e-2, warmup_steps=1, total_steps=3),
        eval=InLoopEvalConfig(
            heldout={name: c["path"] for name, c in caches.items()},
            tokenizer=tokenizer,
            every_steps=3,
            max_sequences=None,
        ),
    )
    run_training(config, str(tmp_path / "run"))
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    in_loop = next(r for r in reversed(logged) if "eval/bpb/macro_avg" in r)

    # tokenizer and seq_len come from the run's recorded config; the caches are the ones built above
    result = _suite_json(capsys, "--checkpoint", str(tmp_path / "run"), "--suite", str(suite), "--prefix", prefix)

    assert result["step"] == 3 and result["seq_len"] == SEQ_LEN
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
