"""`tootsie datakit extract` and `langid` keep their JSON contract."""

import json

import pytest

from tests.datakit.web_site import REJECTED, build_site
from tootsie.cli.main import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_extract_then_langid_json(tmp_path, capsys) -> None:
    site = build_site(tmp_path, pages=4)
    docs, lang = str(tmp_path / "docs"), str(tmp_path / "lang")
    command = ["datakit", "extract", str(site.warc), "--out", docs, "--format", "markdown", "--workers", "1", "--json"]
    assert main(command) == 0
    extracted = _last_json(capsys)
    # the CLI's size guard is the default 5 MB, so the test site's 100 KB page is a document here
    rejected = {reason: n for reason, n in REJECTED.items() if reason != "too_large"}
    assert {k: extracted[k] for k in ("input_records", "output_docs", "rejected", "shards")} == {
        "input_records": len(site.paragraphs) + sum(REJECTED.values()),
        "output_docs": len(site.paragraphs) + 1,
        "rejected": rejected,
        "shards": 1,
    }
    assert main(["datakit", "langid", docs, "--out", lang, "--workers", "1", "--json"]) == 0
    labelled = _last_json(capsys)
    assert labelled["docs"] == len(site.paragraphs) + 1
    assert sum(labelled["languages"].values()) == labelled["docs"] and labelled["languages"]["en"] >= 4


def test_extract_refuses_unknown_engine(tmp_path) -> None:
    with pytest.raises(SystemExit):
        main(["datakit", "extract", str(tmp_path), "--out", str(tmp_path / "o"), "--engine", "lynx"])
