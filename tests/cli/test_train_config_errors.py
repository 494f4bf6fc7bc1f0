"""`tootsie train` refuses a misspelt registry choice when it loads the config.

It prints one line naming the field and the choices, and makes no output directory.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import communicate

CONFIG = """\
model: {{vocab_size: 64, hidden_dim: 16, intermediate_dim: 32, num_layers: 1, num_heads: 2, num_kv_heads: 1}}
num_steps: 4
schedule: {{kind: wsd, peak_lr: 0.001, warmup_steps: 1, decay_steps: 1, total_steps: 4}}
data:
  caches: {{code: /nonexistent/cache}}
  stages: [{{start_step: 0, weights: {{code: 1.0}}}}]
  permutation: {permutation}
"""


def _train(tmp_path: Path, permutation: str) -> tuple[int, str, Path]:
    (tmp_path / "bad.yaml").write_text(CONFIG.format(permutation=permutation), encoding="utf-8")
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(tmp_path / "bad.yaml"), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = communicate(process, timeout=120)
    return process.returncode, err, out


@pytest.mark.parametrize(
    ("permutation", "message"),
    [
        (
            "{kind: fiestel}",
            "tootsie: bad.yaml:train.data.permutation.kind: unknown kind 'fiestel'; "
            "choose one of ['block', 'era', 'feistel', 'linear']",
        ),
        (
            "{kind: era, era_lenght: 64}",
            "tootsie: bad.yaml:train.data.permutation: unknown field 'era_lenght' for EraConfig; "
            "known fields: era_length, rounds",
        ),
        (
            "feistel",
            "tootsie: bad.yaml:train.data.permutation: a bare name 'feistel' is not accepted here; "
            "write {kind: feistel} (options of the kind as more keys)",
        ),
    ],
    ids=["misspelt-kind", "misspelt-option", "bare-name"],
)
def test_a_bad_permutation_fails_at_load_before_any_output(tmp_path: Path, permutation: str, message: str) -> None:
    code, err, out = _train(tmp_path, permutation)
    assert code == 2
    assert err.strip().splitlines() == [message]
    assert not out.exists()
