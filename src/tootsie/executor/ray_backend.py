"""The Ray backend of the executor: each step's function runs as a Ray task with the step's declared resources.

`run_experiment(..., backend="ray")` keeps every piece of bookkeeping in the
driver (the process that called it), exactly as the local runner does: it
decides skip / run / DEP_FAILED, takes the step's lease and heartbeats it,
moves a damaged output (and those downstream of it) aside, writes the status
and metadata files, and writes SUCCESS last. Only
`fn(config, output_path)` runs in a Ray worker, through `staging.call_step`,
which captures the step's log into its `.executor.log` (plus a line naming the
worker's host and pid; the metadata file names the driver's). So the semantics
are the local runner's: finished steps are skipped, a failure makes the step
FAILED and its readers DEP_FAILED, and concurrent runs on one prefix run each
step once (the leases name the driver's pid, which is alive while its tasks run).

What changes is scheduling: a step is submitted as soon as all its inputs are
done, so independent steps run at once, as many as the cluster's resources
allow (`Step.resources` becomes `num_cpus`, `num_gpus` and `memory`). A step
whose lease another live process holds is polled, not waited on, so the rest of
the graph keeps moving. Steps are not retried (`max_retries=0`): a worker that
dies (killed, out of memory) leaves the step FAILED with Ray's error in its log,
as a crash of the local process would, and a rerun resumes it. Ctrl-C in the
driver cancels the running tasks and records them FAILED.

Where outputs live: with a local prefix, the driver and every worker must see
it at the same absolute path (one machine, or a network filesystem mounted
alike on every node), because workers write outputs and logs there and the
driver writes status, lease and metadata files next to them. With a prefix in
object storage (s3://...) no shared filesystem is needed: the worker copies
the step's inputs to its own disk, runs the function on a local staging
directory and uploads it (`staging`); the driver writes SUCCESS after that.

Example: with the demo's steps, `tootsie run experiments/demo.py --backend ray`
starts `demo/normalized/code` and `demo/normalized/prose` together once
`demo/raw/stdlib` is done; each is one task reserving 1 CPU.
"""

import contextlib
import dataclasses
import importlib.machinery
import logging
import os
import socket
import sys
import time
from typing import Any

from tootsie.errors import TootsieError
from tootsie.executor.graph import Graph, Node
from tootsie.executor.lease import Heartbeat
from tootsie.executor.remote_lease import open_lease
from tootsie.executor.report import StepReport, describe_error
from tootsie.executor.runner import POLL_SECONDS, Attempt, RunContext, holder_of, log_to_step
from tootsie.executor.staging import StepCall, call_step, prepare_call
from tootsie.executor.status import Status
from tootsie.executor.step import Resources, Step

try:
    import ray
    from ray import cloudpickle
    from ray.exceptions import RayError, RayTaskError
except ModuleNotFoundError:
    raise TootsieError(
        "the Ray backend needs Ray: install it with pip install 'tootsie[ray]', or use --backend local"
    ) from None

logger = logging.getLogger(__name__)


def run_in_worker(call: StepCall) -> str | None:
    """`call_step` in a Ray worker, after noting in the step's log which host and pid run it."""
    log_to_step(
        call.output,
        logging.INFO,
        "step %s: in Ray worker pid %d on host %s",
        call.name,
        os.getpid(),
        socket.gethostname(),
    )
    return call_step(call)


_remote_step = ray.remote(run_in_worker)


def connect(address: str | None) -> bool:
    """Connect this process to Ray unless it already is; True if this call did (the caller then shuts it down).

    `address` names a running cluster ("ray://host:10001", "host:6379", "auto");
    None uses $RAY_ADDRESS when set and otherwise starts a local Ray.
    """
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address)
    except (ConnectionError, ValueError, RuntimeError) as error:
        raise TootsieError(
            f"cannot connect to Ray at {address!r} ({describe_error(error)}); start a cluster with `ray start --head` "
            "and pass its address, or leave the address out to start a local Ray"
        ) from None
    return True


def run_on_ray(context: RunContext, *, address: str | None) -> list[StepReport]:
    """Run the steps of `context` as Ray tasks; the report of every step, in graph order."""
    started_here = connect(address)
    try:
        ship_by_value(context.graph)
        return _Scheduler(context).run()
    finally:
        if started_here:
            ray.shutdown()


def task_options(resources: Resources) -> dict[str, Any]:
    """Ray task options for a step with `resources`; Ray's own retries off (a step runs once per run)."""
    options: dict[str, Any] = {"num_cpus": resources.cpus, "num_gpus": resources.gpus, "max_retries": 0}
    if resources.memory_gb is not None:
        options["memory"] = int(resources.memory_gb * 2**30)
    return options


def ship_by_value(graph: Graph) -> None:
    """Let workers unpickle steps from experiment files: modules no worker can import are sent by value.

    An experiment file is imported under a made-up module name (see
    `load_experiment`), so a worker cannot import its functions and config
    classes by name; Ray's cloudpickle then sends that module's code instead.
    """
    names = {name for node in graph.nodes for name in _modules_of(node.step)}
    for name in sorted(names):
        module = sys.modules.get(name)
        top = name.partition(".")[0]
        if module is not None and name != "__main__" and importlib.machinery.PathFinder.find_spec(top) is None:
            cloudpickle.register_pickle_by_value(module)


def _modules_of(step: Step[Any]) -> set[str]:
    """Modules defining the step's function and every dataclass inside its config."""
    found = {getattr(step.fn, "__module__", None) or "__main__"}

    def visit(value: Any) -> None:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            found.add(type(value).__module__)
            for field in dataclasses.fields(value):
                visit(getattr(value, field.name))
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    visit(step.config)
    return found


def _fits_some_node(options: dict[str, Any]) -> bool:
    """Whether some live node has at least the CPUs, GPUs and memory that `options` reserve."""
    need = {"CPU": options["num_cpus"], "GPU": options["num_gpus"], "memory": options.get("memory", 0)}
    return any(
        all(node["Resources"].get(key, 0) >= amount for key, amount in need.items() if amount)
        for node in ray.nodes()
        if node["Alive"]
    )


@dataclasses.dataclass
class _Running:
    """A step whose function runs on Ray, and what the driver holds for it."""

    node: Node
    attempt: Attempt
    hold: contextlib.ExitStack
    """The heartbeat thread and the lease; closing it stops the one and releases the other."""


class _Scheduler:
    """Start each step once its inputs are done; collect results as tasks finish."""

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.reports: dict[str, StepReport] = {}
        self.failed: set[str] = set()
        self.reasons: dict[str, str] = {}
        """Node id → why the step runs, once settled (it may then wait on another process's lease)."""
        self.waiting: dict[str, str] = {}
        """Node id → the process this run waited on for it (reported when that process finished the step)."""
        self.running: dict[ray.ObjectRef, _Running] = {}

    def run(self) -> list[StepReport]:
        """Drive the graph to the end; on Ctrl-C cancel the running tasks, record them FAILED, and re-raise."""
        todo = list(self.context.graph.nodes)
        try:
            while todo or self.running:
                ready = [node for node in todo if all(dep in self.reports for dep in node.dependencies)]
                for node in ready:
                    if self._start(node):
                        todo.remove(node)
                if not self.running:
                    time.sleep(POLL_SECONDS)  # only steps whose lease another process holds are left
                    continue
                done, _ = ray.wait(list(self.running), num_returns=1, timeout=POLL_SECONDS)
                for ref in done:
                    self._collect(ref)
        except BaseException as interrupt:
            self._abandon(describe_error(interrupt))
            raise
        return [self.reports[node.id] for node in self.context.graph.nodes]

    def _record(self, node: Node, report: StepReport) -> None:
        self.reports[node.id] = report
        if report.status in (Status.FAILED, Status.DEP_FAILED):
            self.failed.add(node.id)

    def _start(self, node: Node) -> bool:
        """Settle the step or submit its task; False while another live process holds its lease."""
        context, name = self.context, node.step.name
        if node.id not in self.reasons:
            settled = context.settle(node, self.failed)
            if isinstance(settled, StepReport):
                self._record(node, settled)
                return True
            self.reasons[node.id] = settled.reason
        lease = open_lease(node.output_path, context.settings)
        if not lease.acquire():
            if node.id not in self.waiting:
                self.waiting[node.id] = holder_of(lease)
                logger.info("step %s: waiting while %s runs it", name, self.waiting[node.id])
            return False
        claimed = context.claim(node, lease, self.waiting.get(node.id))
        if isinstance(claimed, StepReport):
            self._record(node, claimed)
            return True
        options = task_options(node.step.resources)
        with contextlib.ExitStack() as hold:
            hold.callback(lease.release)
            hold.enter_context(Heartbeat(lease, context.settings.heartbeat_seconds, name))
            attempt = context.begin(node, self.reasons[node.id], claimed)
            if not _fits_some_node(options):
                logger.warning("step %s: no Ray node has %s yet; it waits until one joins", name, node.step.resources)
            try:
                ref = _remote_step.options(**options).remote(prepare_call(context.graph, node))
            except Exception as error:  # noqa: BLE001 - e.g. a config Ray cannot serialize: this step fails, not the run
                self._record(node, context.finish(node, attempt, f"cannot submit to Ray: {describe_error(error)}"))
                return True
            self.running[ref] = _Running(node, attempt, hold.pop_all())
        return True

    def _collect(self, ref: ray.ObjectRef) -> None:
        """Record the outcome of a finished task: the function's error, or Ray's if the worker died."""
        running = self.running.pop(ref)
        try:
            error = ray.get(ref)
        except RayError as failure:  # the worker died or the task could not run: the step did not finish
            cause = failure.cause if isinstance(failure, RayTaskError) and failure.cause is not None else failure
            error = f"Ray task failed: {describe_error(cause)}"
        try:
            self._record(running.node, self.context.finish(running.node, running.attempt, error))
        finally:
            running.hold.close()

    def _abandon(self, why: str) -> None:
        """Cancel every running task and record its step FAILED with `why`."""
        for ref, running in self.running.items():
            ray.cancel(ref, force=True)
            try:
                self.context.finish(running.node, running.attempt, f"interrupted: {why}")
            finally:
                running.hold.close()
        self.running.clear()
