"""The report's tables and damage findings, on records built by hand."""

from pathlib import Path

from tootsie.report.data import RunData, RunDirectory
from tootsie.report.tables import damage, damage_lines, overview_table


def _directory(records: list[dict[str, object]], skipped_lines: int = 0) -> RunDirectory:
    run = RunData("a", records, {"num_steps": 20}, "config.json")
    return RunDirectory(Path("runs/a"), (run,), skipped_lines, 0, {})


def test_damage_counts_gaps_and_non_finite_values_and_says_so() -> None:
    records = [{"step": s, "loss": 2.0, "tokens": 64 * (s + 1)} for s in [*range(10), *range(15, 20)]]
    records[3]["loss"] = float("nan")
    found = damage(_directory(records, skipped_lines=1))
    assert found["runs"]["a"] == {"non_finite": {"loss": 1}, "missing_steps": 5, "gaps": [(10, 14)]}
    lines = damage_lines(found)
    assert lines[0].startswith("1 unparseable line(s) of metrics.jsonl") and "a: null or non-finite" in lines[1]
    assert "5 step(s) missing from the log (gaps at 10–14)" in lines[2]
    assert damage_lines(damage(_directory(records[:3]))) == (
        "Nothing: every line parsed, no step is missing, every plotted value is finite.",
    )


def test_overview_names_the_span_the_final_loss_and_the_config() -> None:
    table = overview_table(_directory([{"step": s, "loss": 3.0 - s / 10, "tokens": 128.0 * (s + 1)} for s in range(5)]))
    assert table.rows == (("a", "0–4", "5", "640", "2.6", "—", "—", "config.json"),)
