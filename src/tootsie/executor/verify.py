"""Check "one hash, one content": rerun finished steps into scratch and compare their manifests with the recorded ones.

A finished step's output directory holds the manifest of what it wrote
(`manifest`: path, size and sha256 of every file). `verify` calls the step's
function again on the same inputs, with its output in an empty scratch
directory, and compares the manifest the rerun records there with the
recorded one. Files the step declares volatile (logs, timings) are listed but
never compared. Each selected step is rerun on its own, from the prefix's
recorded outputs of the steps it reads, so a difference is pinned to the
step that made it, not to an upstream step.

The rerun sees a second prefix: a scratch root where every other step's
output is a symlink to its directory in the real prefix, and the rerun
step's own output is a fresh empty directory. So the inputs are the same
bytes under other absolute paths, exactly as if the prefix had moved, and an
output that records an absolute path instead of its `portable` name differs
and is named (the same step under two prefixes must write the same bytes).
The rerun never writes the prefix: its status, lease and metadata files are
never written, its step log and manifest go to the scratch directory, and
the scratch directory (default: a fresh `tootsie-verify-*` under the system
temporary directory) lies outside every step's output. A step that resumes
from what its directory holds starts from an empty one, so it does the full
work. Only a local prefix is supported.

Example: the tiny demo, every finished step::

    report = verify_experiment(build_steps(TINY), "/tmp/demo")
    report.ok                         # False when any step's content differs
    report.to_json()["steps"][0]      # {"name": "demo/raw/stdlib", "hash": "dd351d12a5fd", "identical": true,
                                      #  "differing": [], "volatile": [], "seconds": 28.6, ...}
    # a kept scratch (keep=True): <scratch>/tootsie-verify-*/001/demo/raw/stdlib-dd351d12a5fd/ is the rerun,
    # <scratch>/tootsie-verify-*/001/demo/<other step>-<hash> a symlink into the prefix

A step that was not finished, has no recorded manifest (it finished before
manifests existed) or reads an unfinished input is listed with `skipped` and
its reason, and `identical: false`; it is not counted as differing.
"""

import dataclasses
import fnmatch
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.executor.graph import Graph, Node, build_graph
from tootsie.executor.manifest import Manifest, differing, read_manifest
from tootsie.executor.metadata import INFO_FILE, recorded, usable_cpus
from tootsie.executor.progress import ProgressLine, progress_setting
from tootsie.executor.staging import StepCall, call_step, prepare_call
from tootsie.executor.status import Status, read_status
from tootsie.executor.step import Step
from tootsie.executor.steplog import LOG_FILE
from tootsie.extras import require

SCRATCH_PREFIX = "tootsie-verify-"


@dataclasses.dataclass(frozen=True)
class StepVerdict:
    """What rerunning one step showed."""

    name: str
    """Step name, e.g. "demo/tokenize/code/train"."""
    hash: str
    """12-hex-character version hash."""
    identical: bool
    """Whether the rerun wrote the same non-volatile files with the same content (False when skipped or failed)."""
    differing: tuple[str, ...] = ()
    """Relative paths whose content differs or that only one side has, sorted."""
    changes: tuple[str, ...] = ()
    """One line per differing path: sizes and sha256 prefixes of both sides, or which side lacks it."""
    volatile: tuple[str, ...] = ()
    """Relative paths marked volatile on either side: listed, not compared."""
    seconds: float | None = None
    """Duration of the rerun."""
    recorded_seconds: float | None = None
    """Duration of the recorded run, from its metadata."""
    skipped: str | None = None
    """Why the step was not rerun, when it was not."""
    error: str | None = None
    """"<Type>: <message>" when the rerun raised."""
    rerun_path: str | None = None
    """The rerun's output directory, when the scratch directory is kept."""
    note: str | None = None
    """When the recorded run had another number of CPUs than the rerun (XLA CPU's matmul bits depend on it)."""

    @property
    def differs(self) -> bool:
        """Whether the step was rerun and its content differs (or the rerun failed)."""
        return self.skipped is None and not self.identical

    def to_json(self) -> dict[str, Any]:
        """{"name", "hash", "identical", "differing", ...}, `skipped` and `error` only when set."""
        payload = {key: value for key, value in dataclasses.asdict(self).items() if value is not None}
        for key in ("differing", "changes", "volatile"):
            payload[key] = list(payload[key])
        return payload


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """Every step of an experiment, inputs first, with what its rerun showed."""

    prefix: str
    """The absolute local prefix verified."""
    steps: tuple[StepVerdict, ...]
    """One verdict per step version, in run order."""
    scratch: str | None = None
    """The scratch directory, when it was kept (`keep=True`)."""

    @property
    def verified(self) -> tuple[StepVerdict, ...]:
        """The steps that were rerun."""
        return tuple(step for step in self.steps if step.skipped is None)

    @property
    def ok(self) -> bool:
        """At least one step was rerun and none of them differs or failed."""
        return bool(self.verified) and not any(step.differs for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        """{"steps": [...], "ok", "prefix", "scratch", "verified", "differing", "skipped"}."""
        return {
            "steps": [step.to_json() for step in self.steps],
            "ok": self.ok,
            "prefix": self.prefix,
            "scratch": self.scratch,
            "verified": len(self.verified),
            "differing": sum(step.differs for step in self.steps),
            "skipped": len(self.steps) - len(self.verified),
        }


def verify_experiment(
    steps: Sequence[Step[Any]],
    prefix: str | os.PathLike[str],
    *,
    steps_glob: str | None = None,
    scratch: str | os.PathLike[str] | None = None,
    keep: bool = False,
) -> VerifyReport:
    """Rerun every finished step of `steps` (and the steps they read) under the local `prefix`; compare manifests.

    `steps_glob` (fnmatch on step names) selects steps; default all. The reruns
    write to a fresh directory `tootsie-verify-*` under `scratch` (default: the
    system temporary directory), removed afterwards unless `keep`.
    """
    return verify_graph(build_graph(steps, prefix), steps_glob=steps_glob, scratch=scratch, keep=keep)


def verify_graph(
    graph: Graph, *, steps_glob: str | None = None, scratch: str | os.PathLike[str] | None = None, keep: bool = False
) -> VerifyReport:
    """`verify_experiment` on a built graph."""
    if storage.is_remote(graph.prefix):
        raise TootsieError(
            f"verify needs a local prefix, not {graph.prefix}; copy the outputs to a local directory and verify there"
        )
    selected = select_nodes(graph, steps_glob)
    skips = {node.id: skip_reason(graph, node) for node in selected}
    todo = [node for node in selected if skips[node.id] is None]
    for node in todo:
        require(node.step.required_extras, purpose=f"verifying step {node.step.name}")
    root = make_scratch(graph, scratch)
    verdicts = {}
    progress = ProgressLine("verify", len(todo), "step", interval=0.0)
    try:
        for index, node in enumerate(todo, start=1):
            progress.update(index, [node.step.name])
            verdicts[node.id] = rerun(graph, node, os.path.join(root, f"{index:03d}"), keep=keep)
    finally:
        progress.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    steps = tuple(
        verdicts[node.id] if node.id in verdicts else _skipped(node, skips[node.id] or "") for node in selected
    )
    return VerifyReport(graph.prefix, steps, root if keep else None)


def select_nodes(graph: Graph, steps_glob: str | None) -> list[Node]:
    """The nodes whose name matches `steps_glob` (every node when None); a glob matching none is a TootsieError."""
    if steps_glob is None:
        return list(graph.nodes)
    chosen = [node for node in graph.nodes if fnmatch.fnmatchcase(node.step.name, steps_glob)]
    if not chosen:
        names = ", ".join(node.step.name for node in graph.nodes)
        raise TootsieError(f"--steps {steps_glob!r} matches no step; the steps are: {names}")
    return chosen


def skip_reason(graph: Graph, node: Node) -> str | None:
    """Why `node` cannot be verified (not finished, no recorded manifest, an input not finished), else None."""
    record = read_status(node.output_path)
    if record is None or record.status is not Status.SUCCESS:
        return f"not finished ({'NOT_STARTED' if record is None else record.status}); run the experiment first"
    if read_manifest(node.output_path) is None:
        return "no recorded manifest (it finished before manifests existed); rerun it with --force to record one"
    for dep in node.dependencies:
        source = graph.by_id[dep]
        found = read_status(source.output_path)
        if found is None or found.status is not Status.SUCCESS:
            return f"input {source.step.name} is not finished; run the experiment first"
    return None


def make_scratch(graph: Graph, scratch: str | os.PathLike[str] | None) -> str:
    """A fresh `tootsie-verify-*` directory under `scratch` (default: the system temporary directory).

    It must lie outside every step's output directory, so a rerun never writes into the prefix's steps.
    """
    parent = tempfile.gettempdir() if scratch is None else os.path.abspath(os.fspath(scratch))
    for node in graph.nodes:
        if parent == node.output_path or parent.startswith(node.output_path + os.sep):
            raise TootsieError(
                f"scratch directory {parent} is inside the output of step {node.step.name}; "
                "pass --scratch a directory outside every step's output (default: the system temp directory)"
            )
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent)


def relocated(graph: Graph, root: str) -> Graph:
    """`graph` with every output under the local directory `root` instead of its prefix (same ids, same hashes)."""
    nodes = tuple(dataclasses.replace(node, output_path=os.path.join(root, node.id)) for node in graph.nodes)
    return Graph(prefix=root, nodes=nodes, ids=graph.ids)


def prepare_rerun(graph: Graph, node: Node, root: str) -> StepCall:
    """The call of `node` with the prefix moved to the empty directory `root`: its output a fresh directory there.

    Every other step's existing output appears under `root` as a symlink to its directory in the prefix. The
    call's places name both the symlinks and the real directories by step id, so `portable` gives the same
    names for a path however the step reaches it (a resolved symlink too).
    """
    moved = relocated(graph, root)
    places = [(graph.prefix, "")]
    for other in graph.nodes:
        if other.id != node.id and os.path.isdir(other.output_path):
            link = moved.by_id[other.id].output_path
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(other.output_path, link, target_is_directory=True)
            places.append((other.output_path, other.id))
    call = prepare_call(moved, moved.by_id[node.id])
    os.makedirs(call.workdir)
    return dataclasses.replace(call, places=call.places + tuple(places))


def rerun(graph: Graph, node: Node, root: str, *, keep: bool = False) -> StepVerdict:
    """Call `node`'s function with the prefix moved to the new directory `root` (`prepare_rerun`); compare manifests.

    The step's own progress lines are off while it runs (its log goes to its scratch output); `root` is removed
    afterwards unless `keep`.
    """
    started = time.perf_counter()
    call = prepare_rerun(graph, node, root)
    with progress_setting("off"):
        error = call_step(call)
    seconds = round(time.perf_counter() - started, 3)
    known = recorded(node.output_path).seconds
    try:
        if error is not None:
            hint = f"; its log is {call.workdir}/{LOG_FILE}" if keep else "; rerun verify with --keep to read its log"
            return StepVerdict(
                node.step.name, node.hash, False, seconds=seconds, recorded_seconds=known, error=error + hint
            )
        fresh = read_manifest(call.workdir)
        previous = read_manifest(node.output_path)
        if fresh is None or previous is None:
            raise TootsieError(f"step {node.step.name}: a manifest is missing after its rerun in {call.workdir}")
        paths = differing(previous, fresh)
        volatile = sorted({entry.path for entry in previous.files + fresh.files if entry.volatile})
        return StepVerdict(
            node.step.name,
            node.hash,
            not paths,
            tuple(paths),
            tuple(describe_changes(previous, fresh, paths)),
            tuple(volatile),
            seconds,
            known,
            rerun_path=call.workdir if keep else None,
            note=cpu_note(node.output_path),
        )
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def cpu_note(directory: str) -> str | None:
    """A note when the step's metadata records another CPU count than this process may use, else None."""
    cpus = (storage.read_json(os.path.join(directory, INFO_FILE)) or {}).get("cpus")
    here = usable_cpus()
    if not isinstance(cpus, int) or cpus == here:
        return None
    return (
        f"recorded on {cpus} CPUs, rerun on {here}: XLA CPU splits matmuls over that many threads, "
        "which changes training's bits (docs/reproducibility.md); verify on the recorded CPU count"
    )


def describe_changes(recorded_manifest: Manifest, fresh: Manifest, paths: Iterable[str]) -> list[str]:
    """One line per path in `paths`: both sides' size and sha256 prefix, or which side lacks the file."""
    old = {entry.path: entry for entry in recorded_manifest.files}
    new = {entry.path: entry for entry in fresh.files}
    lines = []
    for path in paths:
        before, after = old.get(path), new.get(path)
        if after is None and before is not None:
            lines.append(f"{path}: missing in the rerun (recorded {before.size} bytes)")
        elif before is None and after is not None:
            lines.append(f"{path}: only in the rerun ({after.size} bytes)")
        elif before is not None and after is not None:
            lines.append(
                f"{path}: recorded {before.size} bytes sha256 {before.sha256[:12]}, "
                f"rerun {after.size} bytes sha256 {after.sha256[:12]}"
            )
    return lines


def _skipped(node: Node, reason: str) -> StepVerdict:
    return StepVerdict(
        node.step.name, node.hash, False, recorded_seconds=recorded(node.output_path).seconds, skipped=reason
    )
