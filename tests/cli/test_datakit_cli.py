"""`tootsie datakit` commands keep their JSON contract and fail with one-line errors."""

import json

from tootsie.cli.main import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_normalize_train_tokenizer_tokenize_json(tmp_path, capsys) -> None:
    lines = [json.dumps({"text": f"line {i} of plain words"}) for i in range(50)] + [json.dumps({"text": "line 3 of plain words"}), '{"text": "cut']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["datakit", "normalize", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "docs"), "--workers", "1", "--json"]) == 0
    normalized = _last_json(capsys)
    assert {k: normalized[k] for k in ("input_docs", "output_docs", "exact_duplicates", "rejected")} == {
        "input_docs": 52, "output_docs": 50, "exact_duplicates": 1, "rejected": {"broken_json": 1},
    }
    assert main(["datakit", "train-tokenizer", str(tmp_path / "docs"), "--vocab-size", "300", "--out", str(tmp_path / "tok.json"), "--json"]) == 0
    assert _last_json(capsys)["vocab_size"] <= 300
    assert main(["datakit", "tokenize", str(tmp_path / "docs"), "--tokenizer", str(tmp_path / "tok.json"), "--out", str(tmp_path / "cache"), "--workers", "1", "--json"]) == 0
    tokenized = _last_json(capsys)
    assert tokenized["docs"] == 50 and tokenized["tokens"] > 50 * 3


def test_bad_flags_are_one_line_errors(tmp_path, capsys) -> None:
    assert main(["datakit", "normalize", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"tootsie: input not found: {tmp_path / 'missing.jsonl'}"
    assert main(["datakit", "train-tokenizer", str(tmp_path), "--vocab-size", "10", "--out", str(tmp_path / "t.json")]) == 2
    assert "vocab_size must be >= 260" in capsys.readouterr().err
