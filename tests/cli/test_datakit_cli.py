"""`tootsie datakit` commands keep their JSON contract and fail with one-line errors."""

import json

import pyarrow.parquet as pq

from tootsie.cli.main import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_normalize_train_tokenizer_tokenize_json(tmp_path, capsys) -> None:
    lines = [json.dumps({"text": f"line {i} of plain words"}) for i in range(50)] + [
        json.dumps({"text": "line 3 of plain words"}),
        '{"text": "cut',
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    assert (
        main(
            [
                "datakit",
                "normalize",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(tmp_path / "docs"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    normalized = _last_json(capsys)
    assert {k: normalized[k] for k in ("input_docs", "output_docs", "exact_duplicates", "rejected")} == {
        "input_docs": 52,
        "output_docs": 50,
        "exact_duplicates": 1,
        "rejected": {"broken_json": 1},
    }
    assert (
        main(
            [
                "datakit",
                "train-tokenizer",
                str(tmp_path / "docs"),
                "--vocab-size",
                "300",
                "--out",
                str(tmp_path / "tok.json"),
                "--json",
            ]
        )
        == 0
    )
    assert _last_json(capsys)["vocab_size"] <= 300
    assert (
        main(
            [
                "datakit",
                "tokenize",
                str(tmp_path / "docs"),
                "--tokenizer",
                str(tmp_path / "tok.json"),
                "--out",
                str(tmp_path / "cache"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    tokenized = _last_json(capsys)
    assert tokenized["docs"] == 50 and tokenized["tokens"] > 50 * 3


def test_bad_flags_are_one_line_errors(tmp_path, capsys) -> None:
    assert main(["datakit", "normalize", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"tootsie: input not found: {tmp_path / 'missing.jsonl'}"
    assert (
        main(["datakit", "train-tokenizer", str(tmp_path), "--vocab-size", "10", "--out", str(tmp_path / "t.json")])
        == 2
    )
    assert "vocab_size must be >= 260" in capsys.readouterr().err


def test_filter_dedup_decontaminate_consolidate_json(tmp_path, capsys) -> None:
    from pydoc_data.topics import topics

    texts = [topics[name][:2000] for name in sorted(topics) if len(topics[name]) > 2500][:30]
    words = texts[1].split(" ")
    texts.append(" ".join(words[:40] + ["CHANGED"] + words[41:]))  # a near duplicate of document 1
    texts += [
        "Please solve: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May?"
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (tmp_path / "eval.jsonl").write_text(
        json.dumps(
            {
                "id": "gsm8k-0",
                "question": (
                    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                    "How many clips did Natalia sell altogether in April and May?"
                ),
            }
        )
        + "\n"
    )
    assert (
        main(
            [
                "datakit",
                "normalize",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(tmp_path / "docs"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()

    assert (
        main(
            [
                "datakit",
                "dedup",
                str(tmp_path / "docs"),
                "--out",
                str(tmp_path / "dedup"),
                "--fuzzy",
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    deduped = _last_json(capsys)
    assert deduped["docs"] == 32 and deduped["fuzzy_duplicates"] == 1 and deduped["output_docs"] == 31

    assert (
        main(
            [
                "datakit",
                "decontaminate",
                str(tmp_path / "dedup"),
                "--eval",
                str(tmp_path / "eval.jsonl"),
                "--out",
                str(tmp_path / "contam"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    kept = deduped["output_docs"] - 1
    assert _last_json(capsys) == {
        "docs": deduped["output_docs"],
        "contaminated": 1,
        "eval_items_matched": 1,
        "total": deduped["output_docs"],
        "kept": kept,
        "dropped": {"contaminated": 1},
    }

    assert (
        main(
            [
                "datakit",
                "consolidate",
                str(tmp_path / "dedup"),
                "--drop",
                f"{tmp_path / 'contam'}:contaminated",
                "--out",
                str(tmp_path / "clean"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    consolidated = _last_json(capsys)
    assert (
        consolidated["output_docs"] == consolidated["kept"] == kept
        and consolidated["dropped"] == consolidated["removed_by"]
    )

    assert (
        main(
            [
                "datakit",
                "filter",
                str(tmp_path / "clean"),
                "--out",
                str(tmp_path / "filtered"),
                "--workers",
                "1",
                "--json",
            ]
        )
        == 0
    )
    filtered = _last_json(capsys)
    assert filtered["docs"] == deduped["output_docs"] - 1 and filtered["output_docs"] == filtered["kept"]
    assert main(["datakit", "consolidate", str(tmp_path / "clean"), "--out", str(tmp_path / "x")]) == 2
    assert "at least one --drop" in capsys.readouterr().err


def test_dedup_lines_cuts_lines_seen_earlier(tmp_path, capsys) -> None:
    texts = ["Home | Docs\nFirst page.", "Home | Docs\nSecond page.", "Third page.\nFirst page."]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    assert main(["datakit", "normalize", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "docs"), "--quiet"]) == 0
    command = ["datakit", "dedup", str(tmp_path / "docs"), "--lines", "--out", str(tmp_path / "dedup"), "--json"]
    assert main([*command, "--workers", "1"]) == 0
    counts = _last_json(capsys)
    assert (counts["duplicate_lines"], counts["duplicate_line_chars"], counts["output_docs"]) == (2, 23, 3)
    kept = pq.read_table(tmp_path / "dedup" / "part-00000.parquet").column("text").to_pylist()
    assert kept == ["Home | Docs\nFirst page.", "Second page.", "Third page.\n"]
