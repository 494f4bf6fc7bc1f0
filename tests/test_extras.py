"""Optional extras: the table matches pyproject, a missing one is one line naming `pip install "tootsie[EXTRA]"`,
and a missing dependency inside a shard fails the job at once instead of counting as a failed shard."""

import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tootsie.datakit import html_extract
from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards
from tootsie.datakit.extract import ExtractConfig, extract, extract_file, extractor_modules
from tootsie.datakit.html_extract import ENGINES
from tootsie.datakit.langid import LangidConfig, langid
from tootsie.eval.lm_eval_step import evaluate_lm_tasks
from tootsie.executor import Step
from tootsie.extras import (
    EXTRAS,
    MissingExtra,
    dependency_error,
    extra_of,
    import_extra,
    require,
    require_for_urls,
    require_modules,
)
from tootsie.monitor.trackers import TensorBoardConfig, WandbConfig, require_trackers

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
NOT_CHECKED = {"gpu", "bench", "all", "dev"}
"""pyproject extras with no EXTRAS entry: a JAX plugin, one benchmark's peers, and the two bundles."""


def _canonical(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _one_line_naming(error: pytest.ExceptionInfo[MissingExtra], extra: str) -> str:
    message = str(error.value)
    assert "\n" not in message and f'pip install "tootsie[{extra}]"' in message, message
    return message


def test_every_extra_lists_the_modules_its_distributions_install() -> None:
    optional = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(optional) - NOT_CHECKED
    owners = importlib.metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        wanted = {_canonical(requirement) for requirement in optional[extra]}
        provided = {_canonical(dist) for module in modules for dist in owners.get(module, ())}
        assert provided == wanted, f"extra {extra!r}: its modules {modules} come from {provided}, pyproject: {wanted}"


def test_a_missing_module_is_one_line_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastwarc", None)  # `import fastwarc` raises, find_spec gives None
    with pytest.raises(MissingExtra) as error:
        require(("demo",), purpose="tootsie demo")
    assert _one_line_naming(error, "demo").startswith("tootsie demo needs fastwarc, which is not installed: ")
    with pytest.raises(MissingExtra) as error:
        import_extra("fastwarc.warc", extra="web", purpose="reading WARCs")
    _one_line_naming(error, "web")
    require(("hf", "lmeval"), purpose="present")
    require_modules(("resiliparse",), extra="demo", purpose="present")


def test_unknown_extras_and_modules_outside_an_extra_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="unknown extra 'webb'"):
        require(("webb",), purpose="x")
    with pytest.raises(ValueError, match="does not bring"):
        require_modules(("lingua",), extra="demo", purpose="x")


def test_urls_need_their_backend_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    require_for_urls(("/tmp/out", "memory://x", "s3://bucket/a"), purpose="here")  # s3fs is installed
    monkeypatch.setitem(sys.modules, "s3fs", None)
    require_for_urls(("/tmp/out", "gs://b/x"), purpose="no s3 URL")
    with pytest.raises(MissingExtra, match=r"tootsie demo --out \(S3://bucket/demo\) needs s3fs") as error:
        require_for_urls(("S3://bucket/demo",), purpose="tootsie demo --out")
    _one_line_naming(error, "s3")


def test_import_errors_become_missing_extras_naming_the_smallest_extra() -> None:
    error = dependency_error(ModuleNotFoundError("No module named 'resiliparse'", name="resiliparse"), purpose="p")
    assert isinstance(error, MissingExtra) and 'pip install "tootsie[demo]"' in str(error)
    assert extra_of("lingua") == "web" and extra_of("torch.nn") == "hf" and extra_of("numpy") is None
    broken = dependency_error(ImportError("cannot import name 'X' from 'numpy'", name="numpy"), purpose="p")
    assert broken is not None and "could not import numpy" in str(broken) and "not bad data" in str(broken)
    same = MissingExtra("already one")
    assert dependency_error(same, purpose="p") is same and dependency_error(ValueError("bad"), purpose="p") is None


def test_steps_and_trackers_declare_their_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    def requires(fn: object) -> tuple[str, ...]:
        return Step("s", fn, ExtractConfig(inputs=("x.warc",))).required_extras  # type: ignore[arg-type]

    assert (
        requires(extract) == ("demo",) and requires(langid) == ("web",) and requires(evaluate_lm_tasks) == ("lmeval",)
    )
    # The step's extra is exactly what the default engine imports; every engine's modules come with `web`.
    assert set(extractor_modules("resiliparse")) == set(EXTRAS["demo"])
    assert all(set(extractor_modules(engine)) <= set(EXTRAS["web"]) for engine in ENGINES)
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    require_trackers((WandbConfig(),))
    with pytest.raises(MissingExtra, match="the 'tensorboard' tracker needs tensorboardX") as error:
        require_trackers((WandbConfig(), TensorBoardConfig()))
    _one_line_naming(error, "tensorboard")


def test_extract_and_langid_check_before_they_make_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><title>t</title><body><p>text</p></body></html>", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "trafilatura", None)
    with pytest.raises(MissingExtra, match="the trafilatura engine needs trafilatura") as error:
        extract(ExtractConfig(inputs=(str(page),), extractor="trafilatura"), str(tmp_path / "out"))
    _one_line_naming(error, "web")
    monkeypatch.setitem(sys.modules, "lingua", None)
    with pytest.raises(MissingExtra, match="needs lingua") as error:
        langid(LangidConfig(input=str(tmp_path)), str(tmp_path / "lang"))
    _one_line_naming(error, "web")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


def test_a_missing_extractor_module_is_not_an_extract_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><title>t</title><body><p>some text</p></body></html>", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "trafilatura", None)
    html_extract._web_module.cache_clear()  # an earlier test's extraction cached trafilatura's import check
    task = ShardTask(name="input-00000", inputs=(str(page), "page.html", "0", ""), output_dir=str(tmp_path / "shard"))
    with pytest.raises(MissingExtra, match="trafilatura"):
        extract_file(task, ExtractConfig(inputs=(str(page),), extractor="trafilatura"))


@dataclass(frozen=True)
class Failure:
    """Which shard fails, and with what: "import" (ModuleNotFoundError) or "extra" (MissingExtra)."""

    shard: str
    kind: str


def failing_shard(task: ShardTask, failure: Failure) -> dict[str, int]:
    """Count attempts in a file; the chosen shard raises a missing-dependency error."""
    attempts = Path(task.output_dir) / f"{task.name}.attempts"
    attempts.write_text(str(int(attempts.read_text()) + 1 if attempts.exists() else 1))
    if task.name == failure.shard and failure.kind == "import":
        raise ModuleNotFoundError("No module named 'trafilatura'", name="trafilatura")
    if task.name == failure.shard:
        require(("web",), purpose=f"shard {task.name}")
    return {"docs": 1}


@pytest.mark.parametrize(("workers", "kind"), [(1, "import"), (1, "extra"), (2, "import")])
def test_a_missing_dependency_in_a_shard_fails_the_job_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, kind: str
) -> None:
    if kind == "extra":
        monkeypatch.setitem(sys.modules, "lingua", None)
    tasks = [ShardTask(name=f"part-{i:05d}", inputs=(), output_dir=str(tmp_path)) for i in range(3)]
    engine = EngineConfig(workers=workers, retries=2, max_failed_shards=3, progress=False)
    with pytest.raises(MissingExtra) as error:
        map_shards(failing_shard, Failure("part-00000", kind), tasks, tmp_path / "done", engine, label="extract")
    message = _one_line_naming(error, "web")
    assert "failed" not in message and "max_failed_shards" not in message
    assert (tmp_path / "part-00000.attempts").read_text() == "1"  # not retried: it would fail the same way
    assert not (tmp_path / "done" / "part-00000.json").exists()
