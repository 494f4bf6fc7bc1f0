"""Call a step's function where its output lives: in place on local disk, through local copies for object storage.

Step functions read and write local paths only; the executor owns remoteness.
With a local prefix, `fn(config, output_path)` writes its output directory
in place, as always. With a prefix in object storage (`s3://bucket/runs`):

1. every input step's output is mirrored to local disk under the cache
   (`$TOOTSIE_CACHE_DIR`, default `~/.cache/tootsie`) at
   `<cache>/inputs/<scheme>/<bucket>/<path>/<name>-<hash>`, and the config the
   function sees holds those local paths. A mirror is downloaded to a
   temporary directory and renamed into place, and it carries the input's
   status file: it is reused only while that file equals the one in the store,
   so a rerun of the input (`--force`) is downloaded again, never read stale;
2. the function writes a staging directory,
   `<cache>/staging/<scheme>/<bucket>/<path>/<name>-<hash>`, which starts as a
   copy of whatever an earlier attempt left in the store, so steps resume as
   they do locally;
3. when it returns, the staging directory is uploaded (`storage.upload_tree`:
   oldest file first, then stale objects removed), and only after that does
   the runner write SUCCESS. A half-uploaded output therefore never looks
   finished. An attempt that raises (or is preempted: `errors.Preempted`)
   uploads what it wrote too, so the next attempt, on any machine, resumes
   from it; an attempt killed outright loses its unsaved work, not its
   correctness.

The exception is what a function declares with `step.direct_outputs`
(training's `checkpoints`): a preempted host must lose nothing since its last
checkpoint, so those are written straight to the store. Such a function is
called as `fn(config, workdir, final_output=<URL>)`, the trainer writes
`<URL>/checkpoints/step-N/` there and resumes from there, and staging neither
downloads nor uploads those top-level names.

The version hash never sees any of this: it names inputs by their ids, not
their paths, so a step has the same hash under every prefix and scheme.

Example: with prefix `s3://b/runs`, `demo/tokenize` reading
`train_docs.ref()` is called as `fn(config, "<cache>/staging/s3/b/runs/demo/tokenize-<hash>")`
with `config.input == "<cache>/inputs/s3/b/runs/demo/train_docs/code-<hash>"`,
and its output ends up under `s3://b/runs/demo/tokenize-<hash>/`.
"""

import contextlib
import dataclasses
import fcntl
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tootsie import storage
from tootsie.errors import Preempted, TootsieError
from tootsie.executor.graph import Graph, Node
from tootsie.executor.lease import LEASE_FILE
from tootsie.executor.manifest import EXECUTOR_FILES, Manifest, build_manifest, write_manifest
from tootsie.executor.portable import step_places
from tootsie.executor.report import describe_error
from tootsie.executor.status import STATUS_FILE, Status
from tootsie.executor.step import StepRef, map_refs
from tootsie.executor.steplog import capture_logs, log_current_exception
from tootsie.jsonfile import read_json

CACHE_ENV = "TOOTSIE_CACHE_DIR"

logger = logging.getLogger(__name__)


def cache_root(environ: Mapping[str, str] = os.environ) -> str:
    """$TOOTSIE_CACHE_DIR, else ~/.cache/tootsie: local copies of remote outputs and staging directories."""
    return os.path.abspath(os.path.expanduser(environ.get(CACHE_ENV) or os.path.join("~", ".cache", "tootsie")))


def local_copy(url: str, kind: str, root: str) -> str:
    """The local directory for the remote directory `url`: `<root>/<kind>/<scheme>/<rest of the URL>`."""
    scheme, _, rest = url.partition("://")
    return os.path.join(root, kind, scheme, *[part for part in rest.split("/") if part])


@dataclasses.dataclass(frozen=True)
class StepCall:
    """One call of a step's function with everything it needs, so it can run here or in a Ray worker."""

    name: str
    """Step name, for log lines."""
    fn: Callable[[Any, str], None]
    """The step's function."""
    config: Any
    """The step's config with every StepRef replaced by a local path."""
    output: str
    """The step's output directory: a local path, or a URL in object storage."""
    workdir: str
    """Where `fn` writes: `output` itself when it is local, else a local staging directory."""
    inputs: tuple[tuple[str, str], ...] = ()
    """(remote output directory, local copy) of each input step, downloaded before `fn` runs."""
    places: tuple[tuple[str, str], ...] = ()
    """(local directory, its name relative to the prefix) of the output, the inputs and the prefix (`portable`)."""
    volatile: tuple[str, ...] = ()
    """Glob patterns of output files that may differ between reruns, marked volatile in the manifest."""
    direct: tuple[str, ...] = ()
    """Top-level outputs `fn` writes straight to `output` (`step.direct_outputs`); it gets `final_output=output`."""

    @property
    def staged(self) -> bool:
        """Whether `fn` writes a local staging directory that is uploaded to `output` afterwards."""
        return self.workdir != self.output

    @property
    def unstaged(self) -> frozenset[str]:
        """Top-level names staging never downloads, uploads or hashes from the workdir: the executor's and `direct`."""
        return EXECUTOR_FILES | frozenset(self.direct)

    def invoke(self) -> None:
        """Call `fn` on `workdir`, handing a function with direct outputs its final output directory."""
        if self.direct:
            self.fn(self.config, self.workdir, final_output=self.output)
        else:
            self.fn(self.config, self.workdir)


def prepare_call(graph: Graph, node: Node, root: str | None = None) -> StepCall:
    """The call of `node`'s function: in place for a local prefix, with local copies under `root` for a remote one.

    The call's places name the output, the inputs and the prefix by their ids (`portable`).
    """
    step = node.step
    volatile = step.volatile_patterns
    if not storage.is_remote(node.output_path):
        workdir = node.output_path
        places = {graph.prefix: "", workdir: node.id}
        places.update({graph.by_id[dep].output_path: dep for dep in node.dependencies})
        config = graph.resolved_config(node)
        return StepCall(
            step.name,
            step.fn,
            config,
            workdir,
            workdir,
            places=tuple(places.items()),
            volatile=volatile,
            direct=step.direct_names,
        )
    base = cache_root() if root is None else root

    def local_path(ref: StepRef) -> str:
        copy = local_copy(graph.node(ref.step).output_path, "inputs", base)
        return os.path.join(copy, ref.subpath) if ref.subpath else copy

    inputs = tuple(
        (graph.by_id[dep].output_path, local_copy(graph.by_id[dep].output_path, "inputs", base))
        for dep in node.dependencies
    )
    config = map_refs(step.config, local_path)
    workdir = local_copy(node.output_path, "staging", base)
    places = {workdir: node.id, **{copy: dep for (_, copy), dep in zip(inputs, node.dependencies)}}
    return StepCall(
        step.name,
        step.fn,
        config,
        node.output_path,
        workdir,
        inputs,
        tuple(places.items()),
        volatile=volatile,
        direct=step.direct_names,
    )


def call_step(call: StepCall) -> str | None:
    """Run `call` with its log captured; None on success, else "<Type>: <message>".

    A staged call first brings its inputs and the previous attempt's output
    to local disk and afterwards uploads its output. The traceback of a
    failure goes to the step's log only. A BaseException that is not an
    Exception (Ctrl-C, SystemExit) is logged and raised again. The Ray backend
    runs this function in a worker, so it touches no status file.
    """
    with capture_logs(call.output) as log:
        try:
            _run(call)
        except BaseException as error:
            log_current_exception(log, call.name)
            if not isinstance(error, Exception):
                raise
            return describe_error(error)
    return None


def _run(call: StepCall) -> None:
    if not call.staged:
        with step_places(dict(call.places)):
            call.invoke()
        _record_manifest(call, call.workdir)
        return
    for source, copy in call.inputs:
        materialize(source, copy)
    stage(call.output, call.workdir, call.unstaged)
    try:
        with step_places(dict(call.places)):
            call.invoke()
    except (Exception, Preempted):  # a preempted attempt's metrics reach the store too, so its rerun has them
        _save_partial(call)
        raise
    manifest = _record_manifest(call, None)
    storage.upload_tree(call.workdir, call.output, skip=call.unstaged)
    write_manifest(call.output, manifest)
    shutil.rmtree(call.workdir)
    logger.info("step %s: uploaded its output to %s", call.name, call.output)


def _record_manifest(call: StepCall, write_to: str | None) -> Manifest:
    """Hash what the step wrote (its direct outputs from the store when staged); write it to `write_to` if given."""
    started = time.perf_counter()
    if call.staged:
        manifest = build_manifest(call.workdir, call.volatile, direct=call.output, direct_names=call.direct)
    else:
        manifest = build_manifest(call.workdir, call.volatile)
    if write_to is not None:
        write_manifest(write_to, manifest)
    size = sum(entry.size for entry in manifest.files)
    logger.info(
        "step %s: manifest of %d files (%d bytes) in %.3f s, digest %s",
        call.name,
        len(manifest.files),
        size,
        time.perf_counter() - started,
        manifest.digest[:12],
    )
    return manifest


def _save_partial(call: StepCall) -> None:
    """Upload what a failed attempt wrote, so a retry resumes from it; an upload error is logged, not raised."""
    try:
        storage.upload_tree(call.workdir, call.output, skip=call.unstaged)
    except (OSError, TootsieError) as error:
        logger.error("step %s: could not upload its partial output to %s (%s)", call.name, call.output, error)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Exclusive flock on `path` for the block, so two processes on this machine never fill one copy at once."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _local_stamp(directory: str) -> dict[str, Any] | None:
    """The status file of a local copy; None when it is missing or damaged (the copy is then refreshed)."""
    try:
        return read_json(os.path.join(directory, STATUS_FILE))
    except TootsieError:
        return None


def materialize(source: str, copy: str) -> None:
    """Make `copy` a local copy of the finished output at `source`, downloading only when it is missing or stale."""
    stamp = storage.read_json(storage.join(source, STATUS_FILE))
    if stamp is None or stamp.get("status") != Status.SUCCESS:
        found = "no status" if stamp is None else stamp.get("status")
        raise TootsieError(f"input {source} is not finished ({found}); run the experiment again to produce it first")
    with _locked(f"{copy}.lock"):
        if _local_stamp(copy) == stamp:
            return
        fresh = f"{copy}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            storage.download_tree(source, fresh, skip=(LEASE_FILE,))
            if _local_stamp(fresh) != stamp:
                raise TootsieError(
                    f"input {source} changed while it was being copied (a rerun?); run the experiment again"
                )
            _swap_in(fresh, copy)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    logger.info("copied input %s to %s", source, copy)


def _swap_in(fresh: str, copy: str) -> None:
    """Move the directory `fresh` to `copy`, replacing a stale copy there."""
    if os.path.exists(copy):
        old = f"{copy}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(copy, old)
        os.rename(fresh, copy)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(fresh, copy)


def stage(output: str, workdir: str, skip: frozenset[str] = EXECUTOR_FILES) -> None:
    """Make `workdir` a fresh local copy of what earlier attempts left at `output`, top-level `skip` left out."""
    shutil.rmtree(workdir, ignore_errors=True)
    fresh = f"{workdir}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        storage.download_tree(output, fresh, skip=skip)
        os.rename(fresh, workdir)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
