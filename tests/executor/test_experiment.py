"""load_experiment: steps from a file, and one clear error for each way a file can be wrong."""

from pathlib import Path

import pytest

from tootsie.errors import TootsieError
from tootsie.executor import Step, load_experiment

from .helpers import CHAIN, write_experiment


def test_loads_steps_and_sibling_modules(tmp_path: Path) -> None:
    (tmp_path / "shared_labels.py").write_text("LABEL = 'from-sibling'\n")
    path = write_experiment(
        tmp_path, "from shared_labels import LABEL\n" + CHAIN + "STEPS.append(Step('exp/d', work, Cfg(label=LABEL)))\n"
    )
    steps = load_experiment(path)
    assert [step.name for step in steps] == ["exp/b", "exp/c", "exp/d"]
    assert all(isinstance(step, Step) for step in steps)
    assert str(tmp_path) not in __import__("sys").path


def test_two_files_with_the_same_stem_do_not_collide(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = write_experiment(tmp_path / "one", "STEPS = [Step('x/one', work, Cfg(label='1'))]")
    second = write_experiment(tmp_path / "two", "STEPS = [Step('x/two', work, Cfg(label='2'))]")
    assert load_experiment(first)[0].name == "x/one"
    assert load_experiment(second)[0].name == "x/two"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("exp.py", "STEPS = [\n  1,\n", r"has a syntax error \(.*exp\.py, line 1\): '\[' was never closed"),
        (
            "exp.py",
            "x = 1\nraise RuntimeError('no data\\nhere')\n",
            r"importing experiment file .*exp\.py' raised RuntimeError: no data here$",
        ),
        ("exp.py", "X = 1\n", "has no STEPS; define a module-level STEPS = \\[...\\] list of tootsie.executor.Step"),
        ("exp.py", "STEPS = 'exp/a'\n", "STEPS in .* is a str; define a module-level STEPS"),
        ("exp.txt", "STEPS = []\n", r"is not a \.py file"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TootsieError, match=message) as info:
        load_experiment(path)
    assert "\n" not in str(info.value)


def test_non_step_in_steps_names_index_and_type(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, "STEPS = [Step('exp/a', work, Cfg(label='a')), Cfg(label='b')]")
    with pytest.raises(TootsieError, match=r"STEPS\[1\] in .* is a Cfg, not a tootsie.executor.Step"):
        load_experiment(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TootsieError, match=r"experiment file '.*nope\.py' not found"):
        load_experiment(tmp_path / "nope.py")
