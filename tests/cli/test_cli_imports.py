"""The CLI imports lazily: `tootsie --help` imports no command module, and `tootsie datakit ...` (its parse,
its run and its spawned workers) never imports JAX."""

import json
import re
import subprocess
import sys
from pathlib import Path

HEAVY = ("jax", "jaxlib", "equinox", "optax")

PROBE = """
import json, sys
from tootsie.cli.main import build_parser
build_parser({command!r})
watched = [name for name in sys.modules if name.split(".")[0] in {heavy!r} or name.startswith("tootsie.cli.")]
print(json.dumps(sorted(watched)))
"""


def _modules_after_building(command: str) -> list[str]:
    """The heavy and command modules imported by a fresh interpreter that builds the parser for `command`."""
    probe = PROBE.format(command=command, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_the_command_list_imports_no_command_module() -> None:
    assert _modules_after_building("") == ["tootsie.cli.main"]


def test_datakit_parsing_imports_no_jax() -> None:
    modules = _modules_after_building("datakit")
    assert not [name for name in modules if name.split(".")[0] in HEAVY], modules
    assert "tootsie.cli.datakit_cmd" in modules and "tootsie.cli.train_cmd" not in modules


def test_a_datakit_run_and_its_spawned_workers_import_no_jax(tmp_path: Path) -> None:
    """`-X importtime` is passed on to "spawn" workers, so stderr lists the imports of every process."""
    for shard in ("a", "b"):
        lines = [{"id": f"{shard}{i}", "text": f"document {shard} number {i} " * 3} for i in range(3)]
        (tmp_path / f"{shard}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    script = Path(sys.executable).with_name("tootsie")
    command = [sys.executable, "-X", "importtime", str(script), "datakit", "normalize"]
    command += [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--out", str(tmp_path / "out")]
    done = subprocess.run([*command, "--workers", "2", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["output_docs"] == 6
    imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", done.stderr, flags=re.MULTILINE)
    assert imported.count("tootsie.cli.main") >= 2, "no worker process was spawned"
    assert not [name for name in imported if name.split(".")[0] in HEAVY]
