"""`tootsie phenomena list` and `run`: the listing's contract, and a run whose last line is its results.json.

`run` is exercised on a fixture phenomenon (`tests/cli/phenomenon_fixture.py`)
so the CLI's plumbing is tested here in seconds; each real phenomenon's smoke
run is tested under tests/recipes/phenomena/.
"""

import dataclasses
import json
from pathlib import Path

import pytest

from tootsie.cli.main import main
from tootsie.recipes.phenomena import registry

NAMES = ["qk-norm-spikes", "z-loss-cooldown", "muon-divergence", "necromancy", "format-contamination", "embedding-norm"]


def test_list_json_names_every_phenomenon_with_its_seed_and_claim(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["phenomena", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [entry["name"] for entry in listing] == NAMES
    assert all(set(entry) == {"name", "seed", "claim"} and entry["seed"] and entry["claim"] for entry in listing)
    assert main(["phenomena", "list"]) == 0
    table = capsys.readouterr().out
    assert all(name in table for name in NAMES)


@pytest.fixture
def fixture_phenomenon(monkeypatch: pytest.MonkeyPatch) -> None:
    """qk-norm-spikes built by the fixture module instead of its training runs."""
    entry = dataclasses.replace(registry.PHENOMENA["qk-norm-spikes"], module="tests.cli.phenomenon_fixture")
    monkeypatch.setitem(registry.PHENOMENA, "qk-norm-spikes", entry)


def test_run_prints_results_json_last_and_a_rerun_reuses_the_step(
    fixture_phenomenon: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["phenomena", "run", "qk-norm-spikes", "--scale", "tiny", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(results) >= {"phenomenon", "seed_quote", "claim", "verdict", "figures", "numbers"}
    assert results["phenomenon"] == "qk-norm-spikes" and results["verdict"] == "partial"
    assert results["numbers"]["final_loss"]["n"] == 3 and results["numbers"]["final_loss"]["sd"] == pytest.approx(0.5)
    [runs] = list(tmp_path.glob("phenomena/qk-norm-spikes/results-*/runs.txt"))
    assert main(argv) == 0 and runs.read_text() == "1"  # the executor skipped the finished step
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == results
    assert main([*argv[:4], "smoke", *argv[5:]]) == 0  # another scale: another config, another output
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["numbers"]["final_loss"]["n"] == 1


def test_an_unknown_phenomenon_or_scale_is_refused_with_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["phenomena", "run", "spikes", "--out", str(tmp_path)])
    assert "qk-norm-spikes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["phenomena", "run", "necromancy", "--scale", "huge", "--out", str(tmp_path)])
    assert "smoke" in capsys.readouterr().err
