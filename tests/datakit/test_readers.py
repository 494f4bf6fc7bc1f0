"""Input expansion: files come in the order the config lists their inputs, named relative to them."""

import fsspec

from tootsie.datakit.readers import expand_inputs, expand_named_inputs
from tootsie.executor.portable import step_places


def test_files_in_input_order_then_relative_path_each_named_relative_to_its_input(tmp_path, monkeypatch) -> None:
    prefix = tmp_path / "a-prefix"
    step_output = prefix / "demo" / "crawl-1a2b"
    (step_output / "b").mkdir(parents=True)
    for name in ("b/c.jsonl", "x.jsonl"):
        (step_output / name).write_text("{}\n")
    fixed = tmp_path / "z-fixed"
    (fixed / "sub").mkdir(parents=True)
    for name in ("sub/b.jsonl", "a.jsonl", ".hidden.jsonl", "notes.csv"):
        (fixed / name).write_text("{}\n")
    fs = fsspec.filesystem("memory")
    fs.pipe("/readers-test/m.jsonl", b"{}\n")
    monkeypatch.chdir(tmp_path)
    inputs = ("z-fixed/", str(step_output), str(tmp_path / "z-fixed" / "s*" / "*.jsonl"), "memory://readers-test")
    with step_places({str(prefix): "", str(tmp_path / "out"): "demo/out-3c4d"}):
        named = expand_named_inputs(inputs)
    assert named == [
        (str(fixed / "a.jsonl"), "z-fixed/a.jsonl"),
        (str(fixed / "sub" / "b.jsonl"), "z-fixed/sub/b.jsonl"),  # listed again by the glob: kept at its first
        (str(step_output / "b" / "c.jsonl"), "demo/crawl-1a2b/b/c.jsonl"),
        (str(step_output / "x.jsonl"), "demo/crawl-1a2b/x.jsonl"),
        ("memory:///readers-test/m.jsonl", "memory://readers-test/m.jsonl"),
    ]
    assert expand_inputs((str(step_output / "x.jsonl"), "z-fixed")) == [
        str(step_output / "x.jsonl"),
        str(fixed / "a.jsonl"),
        str(fixed / "sub" / "b.jsonl"),
    ]
    assert expand_named_inputs((str(step_output / "x.jsonl"),))[0][1] == str(step_output / "x.jsonl")  # by hand
