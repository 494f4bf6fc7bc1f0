"""Small JSON files: atomic writes, and reads of tootsie's own formats that say what is wrong and how to fix it."""

import pytest

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json, read_json_format, write_json_atomic


def test_a_format_file_must_exist_and_carry_its_format(tmp_path) -> None:
    path = tmp_path / "fit.json"
    with pytest.raises(TootsieError, match=r"scaling fit not found: .*fit.json; write one with `tootsie scaling fit`"):
        read_json_format(path, "fit/1", "scaling fit", "write one with `tootsie scaling fit`")
    write_json_atomic(path, {"format": "fit/0", "laws": {}})
    with pytest.raises(TootsieError, match=r"is not a scaling fit \(format 'fit/0', expected 'fit/1'\); write"):
        read_json_format(path, "fit/1", "scaling fit", "write one with `tootsie scaling fit`")
    write_json_atomic(path, {"format": "fit/1", "laws": {}})
    assert read_json_format(path, "fit/1", "scaling fit", "") == read_json(path) == {"format": "fit/1", "laws": {}}
