"""Small JSON files: atomic writes, and reads of tootsie's own formats that say what is wrong and how to fix it."""

import dataclasses
import enum

import pytest

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json, read_json_format, record_from_json, write_json_atomic


def test_a_format_file_must_exist_and_carry_its_format(tmp_path) -> None:
    path = tmp_path / "fit.json"
    with pytest.raises(TootsieError, match=r"scaling fit not found: .*fit.json; write one with `tootsie scaling fit`"):
        read_json_format(path, "fit/1", "scaling fit", "write one with `tootsie scaling fit`")
    write_json_atomic(path, {"format": "fit/0", "laws": {}})
    with pytest.raises(TootsieError, match=r"is not a scaling fit \(format 'fit/0', expected 'fit/1'\); write"):
        read_json_format(path, "fit/1", "scaling fit", "write one with `tootsie scaling fit`")
    write_json_atomic(path, {"format": "fit/1", "laws": {}})
    assert read_json_format(path, "fit/1", "scaling fit", "") == read_json(path) == {"format": "fit/1", "laws": {}}


class _Color(enum.StrEnum):
    RED = "RED"


@dataclasses.dataclass(frozen=True)
class _Record:
    color: _Color
    count: int
    weight: float


def test_a_record_converts_each_field_by_its_type_and_names_the_file_when_malformed() -> None:
    record = record_from_json(_Record, {"color": "RED", "count": "3", "weight": 2, "extra": 1}, "x file", "p", "fix")
    assert record == _Record(_Color.RED, 3, 2.0)
    with pytest.raises(TootsieError, match=r"^x file p is malformed \(KeyError\('weight'\)\); delete it$"):
        record_from_json(_Record, {"color": "RED", "count": 3}, "x file", "p", "delete it")
    with pytest.raises(
        TootsieError, match=r"^x file p is malformed \(ValueError\(\"'BLUE' is not a valid _Color\"\)\); f$"
    ):
        record_from_json(_Record, {"color": "BLUE", "count": 3, "weight": 1}, "x file", "p", "f")
