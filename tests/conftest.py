"""Suite-wide settings: JAX on CPU with rank promotion off, so shape slips fail loudly, and no silent skips in CI.

Strict dtype promotion is switched on per test package (tests/models) rather than
here: optax's Adam bias correction raises an int32 step count to a Python float,
which strict mode rejects inside optax itself.

Under `CI=true` (set by CI) every skip fails the run: `make test` installs every
extra and CI has `../shared/seeds`, so a skip there means an extra failed to
import or the seeds went missing, and a green run would hide it. Locally, skips
stay allowed and `-ra` lists their reasons.
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
"""Whether skips fail the run (CI sets CI=true)."""
_SKIPPED: list[tuple[str, str]] = []


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The reason pytest gives for a skip report (its longrepr is (file, line, message))."""
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr).removeprefix("Skipped: ")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember every skipped test (not xfails) with its reason."""
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Remember every module skipped at collection (a module-level importorskip)."""
    if report.skipped:
        _SKIPPED.append((report.nodeid, _skip_reason(report)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under CI=true, list the skips that fail the run."""
    if STRICT_SKIPS and _SKIPPED:
        terminalreporter.section("skips are failures under CI=true", sep="=", red=True, bold=True)
        for nodeid, reason in _SKIPPED:
            terminalreporter.line(f"{nodeid}: {reason}")
        terminalreporter.line(
            "install every extra (make test does: pip install -e '.[dev,all]') and keep ../shared/seeds beside the repo"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true, a run with any skip fails."""
    if STRICT_SKIPS and _SKIPPED and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
