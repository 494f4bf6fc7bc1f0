"""Run a per-shard function over many shards: in parallel, resumable, within a failure budget.

Every datakit stage is a map over shards (a document Parquet file in, one or
more files out) and, for some, a small reduce. This module owns the map:

- each shard's function writes its outputs atomically and returns a stats dict;
  the engine then writes `<done_dir>/<shard>.json` (the stats) last, so a
  rerun skips exactly the shards that finished, and a SIGKILL costs at most the
  shards in flight;
- shards run in a pool of spawned worker processes (`workers`), so a shard that
  crashes its process (an OOM, a segfault in a native library) costs a retry of
  that shard, not the job; `workers=1` runs inline, for debugging. Every map of
  one process shares its pool, so a worker imports what it runs once, not once
  per map (extract with its site stage runs four maps); a broken pool is
  replaced;
- a shard that still fails after `retries` retries (a `TootsieError`, which
  means bad input, is not retried) is reported with its error;
  the job fails only when more than `max_failed_shards` shards failed, and only
  after every other shard was tried;
- a missing dependency is not bad input: a shard that raises an ImportError
  (or `extras.MissingExtra`) fails the job at once, with one line naming the
  `pip install` that fixes it, and never counts against the failure budget.

The interface is one function, `map_shards`; where the attempts run is the
engine's `backend`: "local" (inline or the process pool above) or "ray" (one
Ray task per attempt, `ray_engine`). Either way `map_shards` itself decides
what is pending, counts attempts, retries and writes the done markers, so the
failure budget means the same thing on both. The default (None) follows the
process: inside a Ray task, such as a step that the executor's Ray backend
runs, shards become Ray tasks on the same cluster; elsewhere they run locally.

Example: `map_shards(normalize_shard, config, tasks, done_dir)` with 3 tasks
whose second raises twice then succeeds returns 3 stats dicts and no failures.
"""

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from tootsie.configfile import unhashed
from tootsie.errors import TootsieError
from tootsie.executor.progress import ProgressLine
from tootsie.extras import dependency_error, require
from tootsie.jsonfile import read_json, write_json_atomic

logger = logging.getLogger(__name__)
C = TypeVar("C")
ShardFn = Callable[["ShardTask", C], dict[str, Any]]
BACKENDS = (None, "local", "ray")


@dataclass(frozen=True)
class EngineConfig:
    """How shards are executed; none of it changes a stage's output, so none of it is hashed."""

    workers: int = unhashed(default_factory=lambda: max(os.cpu_count() or 1, 1))
    """Worker processes of the local backend; 1 runs shards inline in this process (Ray schedules by CPUs)."""
    retries: int = unhashed(2)
    """Extra attempts for a shard that raised or crashed its worker."""
    max_failed_shards: int = unhashed(0)
    """Shards allowed to fail (after retries) before the stage fails."""
    progress: bool = unhashed(True)
    """Show shards done / total (a line on a terminal, else every 20 s on stderr; `$TOOTSIE_PROGRESS=off` hides it)."""
    backend: str | None = unhashed(None)
    """"local" (`workers`), "ray" (a Ray task per shard), or None: Ray inside a Ray task, else local."""
    ray_address: str | None = unhashed(None)
    """Ray cluster for "ray" when this process is not connected yet; None: $RAY_ADDRESS, else a new local Ray."""

    def __post_init__(self) -> None:
        if self.workers < 1 or self.retries < 0 or self.max_failed_shards < 0:
            raise ValueError(
                "need workers >= 1, retries >= 0, max_failed_shards >= 0;"
                f" got {self.workers=}, {self.retries=}, {self.max_failed_shards=}"
            )
        if self.backend not in BACKENDS:
            raise ValueError(
                f"backend must be one of {BACKENDS}, got {self.backend=};"
                " use 'local', 'ray' or None (follow the process)"
            )


def shard_backend(engine: EngineConfig) -> str:
    """Where `engine` runs shards in this process: its `backend`, or for None "ray" inside a Ray task, else "local"."""
    if engine.backend is not None:
        return engine.backend
    ray = sys.modules.get("ray")  # a process that never imported Ray is not a Ray worker
    in_ray_task = ray is not None and ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE
    return "ray" if in_ray_task else "local"


@dataclass(frozen=True)
class ShardTask:
    """One unit of work: a shard name, its input file(s) and where its outputs go."""

    name: str
    """Stable shard name, e.g. "part-00003"; names the done marker."""
    inputs: tuple[str, ...]
    """Input files of this shard."""
    output_dir: str
    """Directory the shard function writes into."""


@dataclass
class ShardResults:
    """Stats of finished shards (in task order) and errors of failed ones."""

    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Shard name → the stats dict its function returned (or its done marker held)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Shard name → its last error, for shards that failed after their retries."""
    skipped: int = 0
    """Shards already finished by an earlier run (their done markers were read, not rerun)."""


def _run_one(fn: ShardFn, task: ShardTask, config: Any) -> dict[str, Any]:
    return fn(task, config)


def _done_path(done_dir: Path, task: ShardTask) -> Path:
    return done_dir / f"{task.name}.json"


def map_shards(
    fn: ShardFn,
    config: C,
    tasks: Sequence[ShardTask],
    done_dir: str | Path,
    engine: EngineConfig,
    label: str = "shards",
) -> ShardResults:
    """Run `fn(task, config)` for every unfinished task; raise if failures exceed the budget."""
    done = Path(done_dir)
    done.mkdir(parents=True, exist_ok=True)
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"shard names must be unique; duplicates in {names}")
    results = ShardResults()
    pending = []
    for task in tasks:
        finished = read_json(_done_path(done, task))
        if finished is not None:
            results.stats[task.name] = finished
            results.skipped += 1
        else:
            pending.append(task)
    attempts = dict.fromkeys((t.name for t in pending), 0)
    progress = _ShardProgress(len(tasks), results.skipped, label, enabled=engine.progress and bool(pending))
    try:

        def record(task: ShardTask, outcome: dict[str, Any] | BaseException) -> bool:
            """Store an outcome; True when the task must be retried. A missing dependency raises at once."""
            if isinstance(outcome, BaseException):
                missing = dependency_error(outcome, purpose=f"{label} shard {task.name}")
                if missing is outcome:
                    raise missing
                if missing is not None:
                    raise missing from outcome
                attempts[task.name] += 1
                error = "".join(traceback.format_exception_only(type(outcome), outcome)).strip()
                if attempts[task.name] <= engine.retries and not isinstance(
                    outcome, TootsieError
                ):  # bad input fails the same way twice
                    logger.warning(
                        "%s %s failed (attempt %d), retrying: %s", label, task.name, attempts[task.name], error
                    )
                    return True
                results.failed[task.name] = error
                logger.error("%s %s failed after %d attempts: %s", label, task.name, attempts[task.name], error)
            else:
                write_json_atomic(_done_path(done, task), outcome)
                results.stats[task.name] = outcome
            progress.advance(outcome)
            return False

        if shard_backend(engine) == "ray":
            require(("ray",), purpose=f"{label} on the Ray backend")
            from tootsie.datakit.ray_engine import run_on_ray  # Ray is an optional extra

            run_on_ray(fn, config, pending, record, address=engine.ray_address)
        elif engine.workers == 1:
            _run_inline(fn, config, pending, record)
        else:
            _run_pool(fn, config, pending, engine.workers, record)
    finally:
        progress.close()
    if len(results.failed) > engine.max_failed_shards:
        first = next(iter(results.failed.items()))
        raise TootsieError(
            f"{len(results.failed)} of {len(tasks)} {label} failed (budget {engine.max_failed_shards}); "
            f"first: {first[0]}: {first[1]};"
            " fix the input or raise max_failed_shards, then rerun (finished shards are kept)"
        )
    results.stats = {name: results.stats[name] for name in names if name in results.stats}
    return results


def _run_inline(fn: ShardFn, config: Any, pending: list[ShardTask], record: Callable[[ShardTask, Any], bool]) -> None:
    """Run tasks one by one in this process, retries at the back of the queue."""
    queue = list(pending)
    while queue:
        task = queue.pop(0)
        try:
            outcome: dict[str, Any] | BaseException = _run_one(fn, task, config)
        except Exception as error:  # a shard's failure is data, counted against the budget
            outcome = error
        if record(task, outcome):
            queue.append(task)


_POOLS: dict[int, tuple[tuple[object, ...], ProcessPoolExecutor]] = {}
"""Worker count → (what its workers inherited, this process's shared pool of spawned workers); `_shared_pool`."""


def _inherited() -> tuple[object, ...]:
    """What a spawned worker copies from this process when it starts: working directory, environment, sys.path."""
    return os.getcwd(), tuple(sorted(os.environ.items())), tuple(sys.path)


def _shared_pool(workers: int) -> ProcessPoolExecutor:
    """The pool of `workers` spawned processes that every map of this process shares.

    A worker pays its imports once (about 0.7 CPU s for extract's modules), not once per map: extract with its
    site stage runs four maps, a step file many. Workers start on demand, so a map of one shard starts one. A pool
    whose workers started under another working directory, environment or sys.path is replaced, so a shard runs
    as in a freshly spawned worker."""
    inherited = _inherited()
    if workers in _POOLS and _POOLS[workers][0] != inherited:
        _discard_pool(workers, wait=True)
    if workers not in _POOLS:
        _POOLS[workers] = (inherited, ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")))
    return _POOLS[workers][1]


def _discard_pool(workers: int, *, wait: bool) -> None:
    """Shut a shared pool down (broken, interrupted or stale) so that the next map starts a fresh one."""
    entry = _POOLS.pop(workers, None)
    if entry is not None:
        entry[1].shutdown(wait=wait, cancel_futures=True)


def shutdown_workers() -> None:
    """Stop this process's shared worker pools and wait for their workers to exit (the next map starts fresh ones);
    for a long-lived process that wants the workers' memory back, and for benchmarks that time cold starts."""
    for workers in list(_POOLS):
        _discard_pool(workers, wait=True)


def _run_pool(
    fn: ShardFn, config: Any, pending: list[ShardTask], workers: int, record: Callable[[ShardTask, Any], bool]
) -> None:
    """Run tasks in spawned processes; a crashed worker breaks the pool, which is rebuilt, and its tasks retried."""
    queue = list(pending)
    while queue:
        broken = False
        pool = _shared_pool(workers)
        try:
            futures: dict[Future[dict[str, Any]], ShardTask] = {}
            while (queue or futures) and not broken:
                while queue and len(futures) < workers and not broken:
                    task = queue.pop(0)
                    try:
                        futures[pool.submit(_run_one, fn, task, config)] = task
                    except BrokenProcessPool:  # a worker died between wait() and this submit
                        queue.insert(0, task)
                        broken = True
                if not futures:
                    break
                finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in finished:
                    task = futures.pop(future)
                    try:
                        outcome = future.result()
                    except BrokenProcessPool as error:
                        broken = True
                        outcome = RuntimeError(f"worker process died ({error})")
                    except Exception as error:  # noqa: BLE001 - counted against the failure budget
                        outcome = error
                    if record(task, outcome):
                        queue.append(task)
        except BaseException:  # a missing dependency or an interrupt: finish what runs, as the pool's `with` did
            _discard_pool(workers, wait=True)
            raise
        if broken:
            queue.extend(futures.values())  # in flight on the broken pool: not their fault, not counted
            _discard_pool(workers, wait=False)


class _ShardProgress:
    """Shards done / total with documents/s and ETA (`executor.progress`: rich on a terminal, plain lines in logs)."""

    def __init__(self, total: int, completed: int, label: str, enabled: bool) -> None:
        self.done, self.documents = completed, 0
        self.started = time.monotonic()
        self.line = ProgressLine(label, total, "shard", mode=None if enabled else "off")
        self.line.restart(completed)

    def advance(self, outcome: dict[str, Any] | BaseException) -> None:
        """One more shard finished (its stats' `total` documents counted) or failed for good."""
        self.done += 1
        if isinstance(outcome, dict) and isinstance(outcome.get("total"), int):
            self.documents += outcome["total"]
        elapsed = time.monotonic() - self.started
        fields = (f"{self.documents / elapsed:,.0f} docs/s",) if self.documents and elapsed > 0 else ()
        self.line.update(self.done, fields)

    def close(self) -> None:
        """Leave the final state on screen or in the log."""
        self.line.close()


def merge_counts(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sum stats dicts key by key (nested dicts recursively; non-numbers must agree or are dropped)."""
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                merged[key] = merge_counts([merged.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                merged[key] = merged.get(key, 0) + value
    return merged
