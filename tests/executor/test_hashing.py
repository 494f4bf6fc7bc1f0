"""Version hashing: stable (order, process, machine), sensitive to every hashed field, blind to unhashed ones."""

import dataclasses
import enum
import json
import pathlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tootsie.configfile import hashed_when_set, unhashed
from tootsie.errors import TootsieError
from tootsie.executor import Step, StepRef, build_graph, canonical_json, step_hash
from tootsie.executor.hashing import canonical

from .helpers import write_experiment


def noop(config: object, output_path: str) -> None:
    """A step function that does nothing."""


@dataclasses.dataclass(frozen=True)
class Inner:
    x: Any = 0
    y: Any = 0


@dataclasses.dataclass(frozen=True)
class Outer:
    a: Any = 0
    b: Any = 0
    inner: Inner = Inner()
    workers: Any = unhashed(default=1)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), children, max_size=3),
    ),
    max_leaves=8,
)


def outer(a: Any, b: Any, x: Any, y: Any, workers: Any = 1) -> Outer:
    return Outer(a=a, b=b, inner=Inner(x=x, y=y), workers=workers)


def no_refs(step: Step[Any]) -> str:
    raise AssertionError("no references expected")


# --- the worked example of tootsie/executor/__init__.py, pinned -------------------------------


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    n_docs: int = 100
    workers: int = unhashed(default=4)


@dataclasses.dataclass(frozen=True)
class TokenizeConfig:
    corpus: StepRef
    vocab_size: int = 512


def example(n_docs: int = 100, workers: int = 4) -> tuple[Step[Any], Step[Any]]:
    corpus = Step("demo/corpus", noop, CorpusConfig(n_docs=n_docs, workers=workers))
    return corpus, Step("demo/tokenize", noop, TokenizeConfig(corpus=corpus.ref("docs.jsonl")))


def test_worked_example_hashes_are_pinned() -> None:
    corpus, tokens = example()
    graph = build_graph([tokens], "/out")
    assert [node.id for node in graph.nodes] == ["demo/corpus-5ade71dc2641", "demo/tokenize-7f077f7467e5"]
    assert canonical_json(graph.node(corpus).version) == (
        '{"config":{"__type__":"CorpusConfig","n_docs":100},"dependencies":{},"name":"demo/corpus"}'
    )
    assert graph.node(tokens).output_path == "/out/demo/tokenize-7f077f7467e5"
    assert graph.resolved_config(graph.node(tokens)).corpus == "/out/demo/corpus-5ade71dc2641/docs.jsonl"
    assert [step_hash(s) for s in example(workers=16)] == ["5ade71dc2641", "7f077f7467e5"]
    assert [step_hash(s) for s in example(n_docs=200)] == ["3ca46efc75aa", "10b7c0507051"]


# --- stability ---------------------------------------------------------------------------------


def test_dict_insertion_order_does_not_matter() -> None:
    first = Step("s", noop, Outer(a={"x": 1, "y": 2, "z": {"p": 1, "q": 2}}))
    second = Step("s", noop, Outer(a={"z": {"q": 2, "p": 1}, "y": 2, "x": 1}))
    assert step_hash(first) == step_hash(second)


def test_field_declaration_order_does_not_matter() -> None:
    forward = dataclasses.make_dataclass("Cfg", [("p", int), ("q", str)], frozen=True)
    backward = dataclasses.make_dataclass("Cfg", [("q", str), ("p", int)], frozen=True)
    assert step_hash(Step("s", noop, forward(p=1, q="x"))) == step_hash(Step("s", noop, backward(q="x", p=1)))


def test_hash_is_the_same_in_processes_with_other_hash_seeds(tmp_path: Path) -> None:
    body = """
    a = Step("exp/a", work, Cfg(label="a", inputs=("x", "y")))
    b = Step("exp/b", work, Cfg(label="b" * 40, inputs=(a.ref("f"), a.ref())))
    STEPS = [b]
    """
    path = write_experiment(tmp_path, body)
    script = (
        "import sys; from tootsie.executor import load_experiment, build_graph; "
        "print(' '.join(n.id for n in build_graph(load_experiment(sys.argv[1]), '.').nodes))"
    )
    ids = set()
    for seed in ("0", "1", "987654"):
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
        result = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, check=True, timeout=120
        )
        ids.add(result.stdout.strip())
    from tootsie.executor import load_experiment

    ids.add(" ".join(node.id for node in build_graph(load_experiment(path), ".").nodes))
    assert len(ids) == 1, ids


@settings(max_examples=200, deadline=None)
@given(a=values, b=values, x=values, y=values)
def test_equal_configs_built_separately_hash_equal(a: Any, b: Any, x: Any, y: Any) -> None:
    rebuilt = json.loads(json.dumps([a, b, x, y]))  # same values, fresh objects (tuples become lists)
    first = step_hash(Step("s", noop, outer(a, b, x, y)))
    assert first == step_hash(Step("s", noop, outer(a, b, x, y)))
    assert first == step_hash(Step("s", noop, outer(*rebuilt)))
    assert canonical_json(canonical(outer(a, b, x, y), hash_of=no_refs)) == canonical_json(
        canonical(outer(*rebuilt), hash_of=no_refs)
    )


# --- sensitivity -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(fields=st.tuples(values, values, values, values), index=st.integers(0, 3), new=values, workers=values)
def test_changing_any_hashed_field_changes_the_hash(
    fields: tuple[Any, ...], index: int, new: Any, workers: Any
) -> None:
    assume(new != fields[index])
    changed = list(fields)
    changed[index] = new
    before = step_hash(Step("s", noop, outer(*fields)))
    assert step_hash(Step("s", noop, outer(*changed))) != before
    assert step_hash(Step("s", noop, outer(*fields, workers=workers))) == before


@settings(max_examples=100, deadline=None)
@given(old=values, new=values)
def test_changing_an_upstream_config_changes_every_downstream_hash(old: Any, new: Any) -> None:
    assume(old != new)

    def chain(value: Any) -> list[str]:
        first = Step("c/first", noop, Outer(a=value))
        second = Step("c/second", noop, Outer(a=first.ref()))
        third = Step("c/third", noop, Outer(b=(second.ref("x"),)))
        side = Step("c/side", noop, Outer(a=1))
        return [node.hash for node in build_graph([third, side], ".").nodes]

    before, after = chain(old), chain(new)
    assert [b != a for b, a in zip(before, after, strict=True)] == [True, True, True, False]


def test_subpath_and_name_changes_change_the_hash() -> None:
    up = Step("up", noop, Outer())
    hashes = {
        step_hash(Step("down", noop, Outer(a=up.ref("x")))),
        step_hash(Step("down", noop, Outer(a=up.ref("y")))),
        step_hash(Step("down", noop, Outer(a=up.ref()))),
        step_hash(Step("down2", noop, Outer(a=up.ref()))),
        step_hash(Step("down", noop, Outer(a=up.ref().step.name))),
    }
    assert len(hashes) == 5


def test_type_name_is_part_of_the_hash() -> None:
    other = dataclasses.make_dataclass("Other", [("x", Any, 0), ("y", Any, 0)], frozen=True)
    assert step_hash(Step("s", noop, Inner())) != step_hash(Step("s", noop, other()))


# --- canonical form and its errors ----------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Grown:
    """`Outer`'s hashed fields plus an optional one added later."""

    a: Any = 0
    b: Any = 0
    inner: Inner = Inner()
    workers: Any = unhashed(default=1)
    added: Any = hashed_when_set()


def test_an_optional_field_added_later_keeps_the_hash_until_it_is_set() -> None:
    grown = Grown.__qualname__
    assert canonical_json(canonical(Grown(), hash_of=step_hash)) == canonical_json(
        canonical(Outer(), hash_of=step_hash)
    ).replace(Outer.__qualname__, grown)
    assert "added" in canonical(Grown(added=0), hash_of=step_hash)


def test_canonical_form_of_supported_types() -> None:
    config = Outer(a=(1, [2.5, None]), b={"p": pathlib.Path("/x/y"), "c": Color.RED}, inner=Inner(x=True, y="s"))
    assert canonical(config, hash_of=no_refs) == {
        "__type__": "Outer",
        "a": [1, [2.5, None]],
        "b": {"c": "red", "p": "/x/y"},
        "inner": {"__type__": "Inner", "x": True, "y": "s"},
    }
    assert canonical_json(canonical(Outer(a=1), hash_of=no_refs)) != canonical_json(
        canonical(Outer(a=1.0), hash_of=no_refs)
    )
    assert canonical_json(canonical(Outer(a=1), hash_of=no_refs)) != canonical_json(
        canonical(Outer(a=True), hash_of=no_refs)
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (Outer(inner=Inner(x={1, 2})), r"config\.inner\.x has unsupported type set; use a frozen dataclass"),
        (Outer(a=[0, float("nan")]), r"config\.a\[1\] is nan"),
        (Outer(b={"k": float("inf")}), r"config\.b\['k'\] is inf"),
        (Outer(a={1: "x"}), r"config\.a has the key 1 of type int; dict keys must be str"),
        (Outer(a=object()), r"config\.a has unsupported type object"),
        (
            Outer(a=Step("up", noop, Outer())),
            r"config\.a holds the Step 'up' itself; depend on its output with step\.ref\(\)",
        ),
        (
            Outer(workers=Step("up", noop, Outer()).ref()),
            r"config\.workers is declared unhashed\(\) but references step 'up'",
        ),
    ],
)
def test_unhashable_values_are_errors_naming_the_field(config: Outer, message: str) -> None:
    with pytest.raises(TootsieError, match=message):
        step_hash(Step("s", noop, config))


def test_non_frozen_nested_dataclass_is_an_error() -> None:
    @dataclasses.dataclass
    class Loose:
        x: int = 0

    with pytest.raises(TootsieError, match=r"config\.inner is a .*Loose, which is not frozen"):
        step_hash(Step("s", noop, Outer(inner=Loose())))  # type: ignore[arg-type]


# --- discovery ---------------------------------------------------------------------------------


def test_dependencies_are_discovered_ordered_and_deduplicated() -> None:
    base = Step("base", noop, Outer(a=1))
    twin = Step("base", noop, Outer(a=1))  # same version: the same node
    other = Step("base", noop, Outer(a=2))  # same name, different config: a second node
    top = Step("top", noop, Outer(a=[base.ref(), twin.ref("f"), other.ref()]))
    graph = build_graph([top, base], "/p")
    assert [node.step.name for node in graph.nodes] == ["base", "base", "top"]
    assert graph.node(base) is graph.node(twin)
    assert graph.node(base).output_path != graph.node(other).output_path
    assert graph.node(top).dependencies == (graph.node(base).id, graph.node(other).id)


def test_cycles_are_errors_naming_the_steps() -> None:
    inputs: list[Any] = []
    first = Step("loop/first", noop, Outer(a=inputs))
    second = Step("loop/second", noop, Outer(a=first.ref()))
    inputs.append(second.ref())
    with pytest.raises(TootsieError, match="cycle: loop/first -> loop/second -> loop/first"):
        build_graph([first], ".")


def test_non_steps_in_the_list_are_errors() -> None:
    with pytest.raises(TootsieError, match=r"steps\[1\] is a str"):
        build_graph([Step("a", noop, Outer()), "b"], ".")  # type: ignore[list-item]
