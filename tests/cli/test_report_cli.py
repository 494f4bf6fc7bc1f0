"""`tootsie report RUN_DIR --json` writes the report and prints one JSON object; bad directories are one-line errors."""

import json
from pathlib import Path

from tests.report.test_report import PANEL_TITLES, SPIKE_STEP, write_synthetic_run
from tootsie.cli.main import main


def test_report_json_names_the_file_panels_spikes_and_skips(tmp_path, capsys) -> None:
    run = write_synthetic_run(tmp_path / "run")
    assert main(["report", str(run), "--out", str(tmp_path / "out" / "r.html"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert (
        result["report"] == str(tmp_path / "out" / "r.html")
        and result["bytes"] == len(page.encode())
        and not (run / "report.html").exists()
    )
    assert result["panels"] == {title: True for title in PANEL_TITLES}
    assert [(s["step"], s["kind"]) for s in result["spikes"]] == [(SPIKE_STEP, "recoverable")]
    assert result["skipped"]["unparseable_lines"] == 2 and result["runs"]["run"]["config"] == str(run / "config.json")


def test_report_of_a_directory_without_metrics_is_a_one_line_error(tmp_path, capsys) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "run directory not found" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err
