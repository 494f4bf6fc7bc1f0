"""`tootsie datakit extract [--no-site-boilerplate]` and `tootsie datakit site-boilerplate` keep their JSON contract."""

import json

from tests.datakit.div_sites import build_div_sites
from tootsie.cli.main import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_extract_removes_site_boilerplate_unless_told_not_to(tmp_path, capsys) -> None:
    sites = build_div_sites(tmp_path)
    extract = ["datakit", "extract", str(sites.warc), "--workers", "1", "--json"]
    assert main([*extract, "--out", str(tmp_path / "on")]) == 0
    on = _last_json(capsys)
    assert on["output_docs"] == 99 and on["rejected"] == {"mostly_boilerplate": 2}
    assert on["site_boilerplate"]["hosts_with_boilerplate"] == 4  # every host but the one-page host
    assert main([*extract, "--out", str(tmp_path / "off"), "--no-site-boilerplate"]) == 0
    off = _last_json(capsys)
    assert off["output_docs"] == 101 and off["site_boilerplate"] is None
    assert main([*extract, "--out", str(tmp_path / "x"), "--no-site-boilerplate", "--min-pages", "3"]) != 0
    assert "--min-pages" in capsys.readouterr().err

    alone = ["datakit", "site-boilerplate", "--input", str(tmp_path / "off"), "--out", str(tmp_path / "alone")]
    assert main([*alone, "--min-pages", "2", "--min-fraction", "0.1", "--workers", "1", "--json"]) == 0
    stats = _last_json(capsys)
    assert (stats["input_docs"], stats["output_docs"]) == (101, 99)
    assert stats["lines_removed"] == on["site_boilerplate"]["lines_removed"]
    positional = ["datakit", "site-boilerplate", str(tmp_path / "off"), "--out", str(tmp_path / "k5")]
    assert main([*positional, "--min-pages", "5", "--workers", "1", "--json"]) == 0
    assert _last_json(capsys)["output_docs"] == 99
