"""Suite-wide settings: JAX on CPU with rank promotion off, so shape slips fail loudly, and no silent skips in CI.

Strict dtype promotion is switched on per test package (tests/models) rather than
here: optax's Adam bias correction raises an int32 step count to a Python float,
which strict mode rejects inside optax itself.

Under `CI=true` (`.ci/run` exports it) every skip fails the run: `make test` installs every
extra and CI has `../shared/seeds`, so a skip there means an extra failed to
import or the seeds went missing, and a green run would hide it. So does every
xfail that is not strict (`pytest.xfail()` in a test, or `@pytest.mark.xfail`
without `strict=True`), whether it failed or passed: a non-strict xfail passes
whatever the test does. A strict xfail that fails as expected is fine (when it
starts passing, pytest itself fails it). Locally, skips and xfails stay
allowed and `-ra` lists their reasons.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402 - the platform must be chosen before JAX initializes

jax.config.update("jax_numpy_rank_promotion", "raise")

from pathlib import Path  # noqa: E402

from jaxtyping import install_import_hook  # noqa: E402

import tests.shape_check  # noqa: E402, F401 - the hook below names its checker by this path

# Shape annotations are checked at run time in the tests: every module that writes them (imports jaxtyping) is
# imported through jaxtyping's hook, with beartype over the array hints (tests/shape_check.py), so a call whose
# arrays disagree with `Float[Array, "batch seq"]`, or with each other's named axes, fails where it happens.
# The modules are found by scanning, so new ones are covered too.
_SOURCE = Path(__file__).resolve().parents[1] / "src"
_SHAPED_MODULES = sorted(
    ".".join(path.relative_to(_SOURCE).with_suffix("").parts)
    for path in (_SOURCE / "tootsie").rglob("*.py")
    if "from jaxtyping import" in path.read_text(encoding="utf-8")
)
install_import_hook(_SHAPED_MODULES, "tests.shape_check.check_shapes")


import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tootsie.datakit.token_cache import TokenCacheWriter  # noqa: E402


@pytest.fixture
def make_cache(tmp_path):
    """Write a token cache of the given documents (lists of ids) and return its directory."""

    def make(name: str, documents: list[list[int]], vocab_size: int = 64) -> str:
        writer = TokenCacheWriter(tmp_path / name, vocab_size=vocab_size, ledger_extra={"tokenizer_sha256": "test"})
        for document in documents:
            writer.append(np.asarray(document))
        writer.close()
        return str(tmp_path / name)

    return make


STRICT_SKIPS = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
"""Whether skips and non-strict xfails fail the run (`.ci/run` sets CI=true)."""
_SKIPPED: list[tuple[str, str]] = []
_LOOSE_XFAILS: list[tuple[str, str]] = []


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The reason pytest gives for a skip report (its longrepr is (file, line, message))."""
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr).removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Mark an xfail's report with whether it was strict (`xfail_strict`), so the controller of xdist workers,
    which sees only reports, can tell: an imperative `pytest.xfail()` never is; a marker is when it (or the
    `xfail_strict` ini option) says `strict=True`."""
    report = yield
    if hasattr(report, "wasxfail"):
        imperative = call.excinfo is not None and call.excinfo.errisinstance(pytest.xfail.Exception)
        default = bool(item.config.getini("xfail_strict"))
        marks = list(item.iter_markers(name="xfail"))
        report.xfail_strict = bool(marks) and not imperative and all(m.kwargs.get("strict", default) for m in marks)
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember every skipped test (not xfails) and every non-strict xfail (failed or passed), with its reason."""
    if hasattr(report, "wasxfail"):
        if not getattr(report, "xfail_strict", False):
            outcome = "XPASS" if report.passed else "XFAIL"
            _LOOSE_XFAILS.append((report.nodeid, f"{outcome} (not strict) {report.wasxfail}".rstrip()))
    elif report.skipped:
        _SKIPPED.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Remember every module skipped at collection (a module-level importorskip)."""
    if report.skipped:
        _SKIPPED.append((report.nodeid, _skip_reason(report)))


def _failure_section(reporter: pytest.TerminalReporter, title: str, entries: list[tuple[str, str]], fix: str) -> None:
    """A red section listing `entries` (test id, reason) that fail the run, and how to fix them."""
    if entries:
        reporter.section(f"{title} are failures under CI=true", sep="=", red=True, bold=True)
        for nodeid, reason in entries:
            reporter.line(f"{nodeid}: {reason}")
        reporter.line(fix)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under CI=true, list the skips and the non-strict xfails that fail the run."""
    if STRICT_SKIPS:
        fix = (
            "install every extra (make test does: pip install -e '.[dev,all]') and keep ../shared/seeds beside the repo"
        )
        _failure_section(terminalreporter, "skips", _SKIPPED, fix)
        fix = (
            "mark an expected failure @pytest.mark.xfail(strict=True, reason=...), which fails once the test passes,"
            " or fix the test; pytest.xfail() inside a test is never strict"
        )
        _failure_section(terminalreporter, "non-strict xfails", _LOOSE_XFAILS, fix)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true, a run with any skip or non-strict xfail fails."""
    failing = _SKIPPED or _LOOSE_XFAILS
    if STRICT_SKIPS and failing and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module, so a worker's JIT-compiled code does not pile up.

    XLA CPU registers every compiled program's unwind tables with libgcc; one process that ran ~1,050 tests
    segfaulted in libgcc's unwinder near the end, and so did a worker of two at ~890 (a crash in whichever test
    came next). No compiled program is shared across test modules, so clearing costs nothing but the memory.
    """
    yield
    jax.clear_caches()
