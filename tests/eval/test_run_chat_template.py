"""A run's chat template comes from its chat caches' ledgers: found, refused when they disagree, none for text."""

import json
from pathlib import Path

import pytest

from tootsie.datakit.chat_templates import CHAT_TEMPLATES, template_sha256
from tootsie.errors import TootsieError
from tootsie.eval.run_chat_template import checkpoint_chat_template, run_chat_template


def _run(root: Path, ledgers: dict[str, dict[str, object]]) -> Path:
    """A run directory whose config.json names one cache per ledger."""
    caches = {}
    for name, ledger in ledgers.items():
        (root / name).mkdir(parents=True)
        (root / name / "ledger.json").write_text(json.dumps({"num_tokens": 10, **ledger}))
        caches[name] = str(root / name)
    (root / "run" / "checkpoints" / "step-000005").mkdir(parents=True)
    (root / "run" / "config.json").write_text(json.dumps({"data": {"caches": caches}}))
    return root / "run"


def _chat(name: str, source: str) -> dict[str, object]:
    return {"chat_template": name, "chat_template_sha256": template_sha256(source)}


def test_the_caches_template_is_found_from_the_run_or_its_checkpoint(tmp_path) -> None:
    run = _run(
        tmp_path, {"a": _chat("chatml", CHAT_TEMPLATES["chatml"]), "b": _chat("chatml", CHAT_TEMPLATES["chatml"])}
    )
    found = run_chat_template(run)
    assert found is not None and found.name == "chatml" and found.source == CHAT_TEMPLATES["chatml"]
    assert found.caches == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert checkpoint_chat_template(run / "checkpoints" / "step-000005") == found


def test_text_caches_and_runs_without_a_config_have_no_template(tmp_path) -> None:
    assert run_chat_template(_run(tmp_path, {"text": {"tokenizer_sha256": "x"}})) is None
    assert run_chat_template(tmp_path / "nowhere") is None


def test_caches_with_different_templates_are_refused(tmp_path) -> None:
    run = _run(
        tmp_path, {"a": _chat("chatml", CHAT_TEMPLATES["chatml"]), "b": _chat("llama3", CHAT_TEMPLATES["llama3"])}
    )
    with pytest.raises(TootsieError, match=r"different chat templates.*'chatml'.*'llama3'.*--chat-template"):
        run_chat_template(run)


def test_a_template_file_is_read_and_checked_against_the_recorded_digest(tmp_path) -> None:
    template = tmp_path / "mine.jinja"
    source = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    template.write_text(source)
    run = _run(tmp_path, {"a": _chat(str(template), source)})
    assert run_chat_template(run).source == source
    template.write_text(source + "changed")
    with pytest.raises(TootsieError, match="mine.jinja.*neither a built-in.*--chat-template FILE"):
        run_chat_template(run)
