"""One hash, one content (issue 25): the stdlib sources depend on their config and the interpreter, not the install.

The bug: `make demo` in two clones gave the same step hashes and different
results, because in a virtualenv `import distutils` gives setuptools' copy
(its `distutils-precedence.pth`), and pydoc printed that copy's path, inside
the virtualenv, into the `distutils` page. `test_two_virtualenvs_give_the_same_hashes_and_bytes`
rebuilds that setup cheaply: two virtualenvs at different paths over the same
Python, each with setuptools from ensurepip's bundled wheel (as `python -m venv`
installs it, `.pth` hack included) and tootsie on its path, render the pages
that print paths and environment (`distutils` among them) and must write the
same bytes under the same hashes.
"""

import ensurepip
import gzip
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import tootsie
from tootsie.corpora.pydoc_source import PydocWarcConfig, rendered_pages
from tootsie.corpora.stdlib_chat import StdlibChatConfig
from tootsie.corpora.stdlib_source import (
    PACKAGE_ROOT,
    STDLIB_ENV,
    StdlibSourceConfig,
    build_stdlib_corpus,
    python_identity,
    stdlib_python_files,
    stdlib_sha256,
)
from tootsie.executor import canonical_json
from tootsie.executor.hashing import canonical

PATH_PAGES = ("abc", "cgi", "os", "platform", "site", "time") + (
    ("distutils",) if "distutils" in sys.stdlib_module_names else ()
)
"""Pages that print the install's paths (file links, `site.PREFIXES`, `platform.architecture`'s executable), the
environment (`cgi`, `os`), the time zone (`time`), and `distutils`, which a virtualenv's setuptools replaces."""

BUILD_IN_VENV = """
import json, sys
from pathlib import Path
from tootsie.corpora.pydoc_source import PydocWarcConfig, build_pydoc_warc
from tootsie.corpora.stdlib_chat import StdlibChatConfig, build_stdlib_chat
from tootsie.corpora.stdlib_source import StdlibSourceConfig, build_stdlib_corpus
from tootsie.executor import Step, step_hash

out, modules = Path(sys.argv[1]), tuple(json.loads(sys.argv[2]))
steps = [
    Step("pydoc", build_pydoc_warc, PydocWarcConfig(max_pages=len(modules), modules=modules)),
    Step("chat", build_stdlib_chat, StdlibChatConfig(modules=("builtins", "json"))),
    Step("stdlib", build_stdlib_corpus, StdlibSourceConfig(max_code_bytes=1)),
]
for step in steps[:2]:
    step.fn(step.config, str(out / step.name))
print(json.dumps({step.name: step_hash(step) for step in steps}))
"""


def make_venv(path: Path) -> Path:
    """A `--system-site-packages` virtualenv at `path` with setuptools' `.pth` hack and tootsie; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # What `python -m venv` installs, without pip (seconds saved); absent from ensurepip after Python 3.11.
    for wheel in Path(ensurepip.__file__).parent.glob("_bundled/setuptools-*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(purelib)
    # tootsie from this checkout, and this environment's packages (the project's dependencies) after it.
    outer = sysconfig.get_path("purelib")
    Path(purelib, "tootsie-under-test.pth").write_text(f"{PACKAGE_ROOT}\nimport site; site.addsitedir({outer!r})\n")
    return python


@pytest.mark.slow
def test_two_virtualenvs_give_the_same_hashes_and_bytes(tmp_path: Path) -> None:
    results = {}
    for name in ("a", "virtualenv-at-a-longer-path"):
        python = make_venv(tmp_path / name)
        home = tmp_path / f"home-{name}"
        home.mkdir()
        env = {"PATH": os.defpath, "HOME": str(home), "TZ": "Asia/Kolkata", "SETTING_OF_VENV": name}
        done = subprocess.run(
            [python, "-c", BUILD_IN_VENV, str(tmp_path / f"out-{name}"), json.dumps(PATH_PAGES)],
            capture_output=True,
            text=True,
            cwd=home,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results[name] = json.loads(done.stdout)
    first, second = (tmp_path / f"out-{name}" for name in results)
    assert results["a"] == results["virtualenv-at-a-longer-path"]
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert [str(f) for f in files] == [
        "chat/heldout.jsonl",
        "chat/train.jsonl",
        "pydoc/pydoc.warc.gz",
        "pydoc/stats.json",
    ]
    for file in files:
        assert (first / file).read_bytes() == (second / file).read_bytes(), f"{file} differs between the two venvs"
    warc = gzip.decompress((first / "pydoc/pydoc.warc.gz").read_bytes()).decode()
    assert json.loads((first / "pydoc/stats.json").read_text())["modules"] == list(PATH_PAGES)
    for leak in (str(tmp_path), "SETTING_OF_VENV", "Kolkata"):
        assert leak not in warc
    assert "tzname</strong> = ('UTC', 'UTC')" in warc
    if "distutils" in PATH_PAGES:
        assert "file:$STDLIB/distutils/__init__.py" in warc


def test_pages_name_no_path_variable_or_zone_of_this_machine() -> None:
    pages = dict(rendered_pages(len(PATH_PAGES), PATH_PAGES))
    assert list(pages) == list(PATH_PAGES)
    machine = {sys.prefix, sys.base_prefix, sys.executable, sysconfig.get_paths()["stdlib"], PACKAGE_ROOT}
    machine |= {str(Path.home()), os.getcwd(), *(f"'{key}'" for key in os.environ if key not in STDLIB_ENV)}
    for name, html in pages.items():
        leaks = [text for text in machine if len(text) > 1 and text in html]
        assert leaks == [], f"the {name} page holds {leaks}"
    assert 'href="file:$STDLIB/abc.py"' in pages["abc"]
    assert "PREFIXES</strong> = ['$PREFIX'" in pages["site"]
    assert "executable='$PYTHON'" in pages["platform"]
    assert "tzname</strong> = ('UTC', 'UTC')" in pages["time"]


def test_configs_hold_the_interpreter_identity_and_no_path() -> None:
    identity = python_identity()
    assert Path(tootsie.__file__).is_relative_to(PACKAGE_ROOT)
    assert identity.version == sys.version and identity.implementation == sys.implementation.name
    assert dict(identity.libraries).keys() == {"expat", "mpdec", "ncurses", "openssl", "sqlite", "zlib"}
    for config in (StdlibSourceConfig(), PydocWarcConfig(), StdlibChatConfig()):
        text = canonical_json(canonical(config, hash_of=lambda step: ""))
        assert identity.stdlib_sha256 in text
        for path in (sys.prefix, sys.base_prefix, sys.executable, str(Path.home()), os.getcwd(), PACKAGE_ROOT):
            assert path not in text, f"{type(config).__name__} hashes the path {path}"


def test_pydoc_modules_must_be_standard_library() -> None:
    with pytest.raises(ValueError, match="numpy"):
        PydocWarcConfig(modules=("abc", "numpy"))


def fake_stdlib(root: Path, text: str) -> Path:
    """A stdlib directory with one module and the files an install puts beside it."""
    for relative in (
        "pkg/mod.py",
        "_sysconfigdata__linux_x86_64-linux-gnu.py",
        "config-3.11-x86_64-linux-gnu/python-config.py",
        "site-packages/thirdparty.py",
        "dist-packages/thirdparty.py",
        "sitecustomize.py",
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text if relative == "pkg/mod.py" else f"PREFIX = {str(root)!r}\n")
    return root


def test_the_install_files_are_neither_read_nor_digested(tmp_path: Path) -> None:
    docstring = '"""A module docstring that is long enough to count as prose."""\n'
    first = fake_stdlib(tmp_path / "one", docstring)
    second = fake_stdlib(tmp_path / "another-install", docstring)
    assert [p.relative_to(first).as_posix() for p in stdlib_python_files(first, 10_000)] == ["pkg/mod.py"]
    assert stdlib_sha256(first) == stdlib_sha256(second)
    (second / "pkg" / "mod.py").write_text(docstring + "x = 1\n")
    assert stdlib_sha256(first) != stdlib_sha256(second)


def test_the_corpus_bytes_hold_no_time_and_no_file_name(tmp_path: Path) -> None:
    config = StdlibSourceConfig(stdlib_dir=str(fake_stdlib(tmp_path / "lib", '"""' + "Prose. " * 10 + '"""\n')))
    build_stdlib_corpus(config, str(tmp_path / "out"))
    data = (tmp_path / "out" / "code" / "docs-00000.jsonl.gz").read_bytes()
    assert data[3] == 0 and data[4:8] == bytes(4)  # gzip FLG (no FNAME) and MTIME (RFC 1952)
    assert [json.loads(line)["id"] for line in gzip.decompress(data).splitlines()] == ["pkg/mod.py"]
