"""Live progress on the commands: lines on stderr while training or mapping shards, none with --quiet.

`--json`'s last stdout line still parses, whatever progress was drawn.
"""

import json
import textwrap
from pathlib import Path

import pytest

from tootsie.cli.main import main
from tootsie.executor.progress import PROGRESS_ENV

TRAIN_CONFIG = """\
model: {{vocab_size: 64, hidden_dim: 32, intermediate_dim: 64, num_layers: 2, num_heads: 2, num_kv_heads: 1}}
num_steps: 4
schedule: {{kind: wsd, peak_lr: 0.003, warmup_steps: 1, decay_steps: 1, total_steps: 4}}
data:
  caches: {{code: {cache}}}
  stages: [{{start_step: 0, weights: {{code: 1.0}}}}]
  seq_len: 32
  batch_schedule: {{stages: [[0, 2]]}}
checkpoints: {{every_steps: 100, every_minutes: null}}
"""

SHARD_EXPERIMENT = """\
import dataclasses
from pathlib import Path

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards
from tootsie.executor import Step


@dataclasses.dataclass(frozen=True)
class Cfg:
    shards: int = 3


def count(task, config):
    return {"total": 5}


def stage(config, output_path):
    tasks = [ShardTask(f"part-{i}", (), output_path) for i in range(config.shards)]
    map_shards(count, config, tasks, Path(output_path) / "done", EngineConfig(workers=1), label="count")


STEPS = [Step("exp/count", stage, Cfg())]
"""


@pytest.fixture(autouse=True)
def auto_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress as a user gets it by default: auto, which is plain lines since the captured stderr is no terminal."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.delenv("TOOTSIE_PREFIX", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_draws_progress_on_stderr_and_json_stays_the_last_line(
    tmp_path: Path, make_cache, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = make_cache("code", [[i % 60 + 2 for i in range(200)] for _ in range(8)])
    (tmp_path / "run.yaml").write_text(TRAIN_CONFIG.format(cache=cache), encoding="utf-8")
    code, out, err = _run(
        capsys, "train", "--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "r"), "--json"
    )
    assert code == 0
    assert json.loads(out.splitlines()[-1])["step"] == 4
    lines = [line.split(" ", 1)[1] for line in err.splitlines() if " train r: " in line]
    assert lines[0].startswith("train r: step 1/4 (25%) loss ") and lines[0].endswith(" tok/s")
    assert lines[-1].startswith("train r: step 4/4 (100%) loss ")


def test_run_shows_shard_progress_and_quiet_shows_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    experiment = tmp_path / "exp.py"
    experiment.write_text(textwrap.dedent(SHARD_EXPERIMENT), encoding="utf-8")
    code, out, err = _run(capsys, "run", str(experiment), "--prefix", str(tmp_path / "a"), "--json")
    assert code == 0 and json.loads(out.splitlines()[-1])["steps"][0]["status"] == "SUCCESS"
    lines = [line.split(" ", 1)[1] for line in err.splitlines()]
    assert lines[0].startswith("count: shard 1/3 (33%) ") and lines[0].endswith(" docs/s")
    assert lines[-1].startswith("count: shard 3/3 (100%) ") and lines[-1].endswith(" docs/s")
    assert any(line.startswith("[executor] step exp/count: run") for line in out.splitlines())
    code, out, err = _run(capsys, "run", str(experiment), "--prefix", str(tmp_path / "b"), "--quiet", "--json")
    assert code == 0 and err == ""
    assert len(out.splitlines()) == 1 and json.loads(out)["steps"][0]["status"] == "SUCCESS"
