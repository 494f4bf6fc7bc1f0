"""Step / StepRef validation, unhashed(), and reference mapping."""

import collections
import dataclasses

import pytest

from tootsie.configfile import is_unhashed, unhashed
from tootsie.executor import Step, StepRef, output_of
from tootsie.executor.step import find_refs, map_refs


@dataclasses.dataclass(frozen=True)
class Cfg:
    value: int = 0
    workers: int = unhashed(default=4)
    tags: tuple[str, ...] = unhashed(default_factory=tuple)


@dataclasses.dataclass(frozen=True)
class Holder:
    refs: object = None
    nested: object = None


def noop(config: object, output_path: str) -> None:
    """A step function that does nothing."""


@pytest.mark.parametrize("name", ["a", "demo/train", "a.b/c-d_e/F9"])
def test_valid_names(name: str) -> None:
    assert Step(name, noop, Cfg()).name == name


@pytest.mark.parametrize("name", ["", "/abs", "a/../b", "a//b", "a/", "has space", "a/./b", "ü"])
def test_invalid_names_are_rejected_with_the_name(name: str) -> None:
    with pytest.raises(ValueError, match="Step name"):
        Step(name, noop, Cfg())


def test_config_must_be_a_frozen_dataclass_instance() -> None:
    @dataclasses.dataclass
    class Mutable:
        x: int = 0

    with pytest.raises(ValueError, match="not frozen"):
        Step("a", noop, Mutable())
    with pytest.raises(ValueError, match="frozen dataclass instance, got dict"):
        Step("a", noop, {"x": 1})
    with pytest.raises(ValueError, match="frozen dataclass instance"):
        Step("a", noop, Cfg)
    with pytest.raises(ValueError, match="callable"):
        Step("a", "noop", Cfg())  # type: ignore[arg-type]


def test_refs_extend_subpaths_and_output_of_matches_ref() -> None:
    step = Step("a", noop, Cfg())
    assert step.ref() == output_of(step) == StepRef(step, "")
    assert (step.ref() / "x" / "y.json").subpath == "x/y.json"
    assert output_of(step, "x") / "y" == step.ref("x/y")
    for bad in ("../x", "/x", "a//b", "a/"):
        with pytest.raises(ValueError, match="subpath"):
            step.ref(bad)


def test_unhashed_marks_fields_and_keeps_defaults() -> None:
    fields = {f.name: f for f in dataclasses.fields(Cfg)}
    assert not is_unhashed(fields["value"])
    assert is_unhashed(fields["workers"]) and is_unhashed(fields["tags"])
    assert Cfg().workers == 4 and Cfg().tags == ()


def test_map_refs_replaces_refs_everywhere_and_copies_only_what_changed() -> None:
    pair = collections.namedtuple("pair", "left right")
    a, b = Step("a", noop, Cfg()), Step("b", noop, Cfg(1))
    config = Holder(
        refs=[a.ref(), {"k": b.ref("f"), "plain": 1}, pair(a.ref("x"), 2)],
        nested=Holder(refs=(b.ref(),), nested=Cfg()),
    )
    resolved = map_refs(config, lambda ref: f"<{ref.step.name}:{ref.subpath}>")
    assert resolved == Holder(
        refs=["<a:>", {"k": "<b:f>", "plain": 1}, pair("<a:x>", 2)],
        nested=Holder(refs=("<b:>",), nested=Cfg()),
    )
    assert resolved.nested.nested is config.nested.nested
    assert [r.step.name for r in find_refs(config)] == ["a", "b", "a", "b"]
    untouched = Holder(refs=[1, (2, 3)], nested={"k": Cfg()})
    assert map_refs(untouched, lambda ref: "x") is untouched
