"""SIGKILL during normalize or tokenize, then rerun: output byte-identical to an uninterrupted run."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tests.processes import finish
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.stats import STATS_FILE
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer

INLINE = EngineConfig(workers=1, progress=False)
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _text(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 60)) + f" {i}"


def _files_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _kill_when(script: str, ready: callable, finished: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while not ready() and process.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    finish(process, timeout=60)
    assert not finished.exists(), "the stage finished before it was killed; make the test input larger"


@pytest.mark.slow
def test_normalize_killed_mid_run_resumes_to_identical_bytes(tmp_path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for f in range(40):
        (inputs / f"in-{f:03d}.jsonl").write_text(
            "".join(json.dumps({"text": _text(f * 1000 + i)}) + "\n" for i in range(1500))
        )
    config = NormalizeConfig(inputs=(str(inputs),), shard_bytes=200_000, engine=INLINE)
    normalize(config, str(tmp_path / "straight"))

    script = textwrap.dedent(f"""
        from tootsie.datakit.engine import EngineConfig
        from tootsie.datakit.normalize import NormalizeConfig, normalize
        normalize(
            NormalizeConfig(
                inputs=({str(inputs)!r},), shard_bytes=200_000, engine=EngineConfig(workers=1, progress=False)
            ),
            {str(tmp_path / "killed")!r},
        )
    """)
    done = tmp_path / "killed" / ".normalize" / "done"
    _kill_when(script, lambda: done.is_dir() and len(list(done.glob("*.json"))) >= 8, tmp_path / "killed" / STATS_FILE)
    normalize(config, str(tmp_path / "killed"))
    assert _files_bytes(tmp_path / "killed") == _files_bytes(tmp_path / "straight")


@pytest.mark.slow
def test_tokenize_killed_mid_run_resumes_to_identical_bytes(tmp_path) -> None:
    docs = tmp_path / "docs"
    for shard in range(30):
        texts = [_text(shard * 500 + i) for i in range(400)]
        write_table_atomic(
            pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / f"part-{shard:05d}.parquet"
        )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=300), str(tmp_path / "tok"))
    config = TokenizeConfig(input=str(docs), tokenizer=str(tmp_path / "tok"), engine=INLINE)
    tokenize_documents(config, str(tmp_path / "straight"))

    script = textwrap.dedent(f"""
        from tootsie.datakit.engine import EngineConfig
        from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
        tokenize_documents(
            TokenizeConfig(
                input={str(docs)!r},
                tokenizer={str(tmp_path / "tok")!r},
                engine=EngineConfig(workers=1, progress=False),
            ),
            {str(tmp_path / "killed")!r},
        )
    """)
    done = tmp_path / "killed" / ".shards" / "done"
    _kill_when(
        script, lambda: done.is_dir() and len(list(done.glob("*.json"))) >= 6, tmp_path / "killed" / "ledger.json"
    )
    tokenize_documents(config, str(tmp_path / "killed"))
    assert _files_bytes(tmp_path / "killed") == _files_bytes(tmp_path / "straight")
