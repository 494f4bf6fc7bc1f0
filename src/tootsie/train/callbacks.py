"""Training callbacks: everything the loop does besides drawing a batch and taking a step.

Design. `train_loop` (`tootsie.train.trainer`) is a short sequence of phases;
checkpoints, guards, rewinds, the profiler, trackers, the record's derived
fields and in-loop evaluation are `Callback`s with lifecycle points:

- `start(run)`: the state is built (resumed, warm-started or fresh);
- `after_step(run, step, record)`: step `step` was trained, `run.state` is
  the state after it (`run.state.step == step + 1`) and `record` its metrics,
  which a callback may add to before the trackers write it;
- `checkpoint(run, path)`: a checkpoint the run wrote is committed (fired in
  the training thread where the loop waits for it: at the next checkpoint, a
  rewind, a preemption or the end, so every process sees it after the same step);
- `rewind(run, event)`: a rewind replaced `run.state` and the data position
  (`run.skips`); the step's remaining `after_step` callbacks were skipped;
- `end(run)`: the run reached `num_steps` (the final checkpoint is written here);
- `error(run, error)`: training raised (a `Preempted` stop too), before `close`;
- `close(run)`: always last, on success or failure (release files and handlers).

Callbacks run in ascending `order` (ties in the order given). `after_step` runs
only when the callback's `every` schedule is due: every N steps, every N
seconds (decided by process 0 and agreed by all, `sharding.agree`, so every
process runs the same callbacks after the same step), and optionally after the
last step. A callback changes the run only through `Run`: `run.rewind` to go
back, `run.save` to checkpoint, or by raising to stop.

Example: MoE router loads are an objective's auxiliary metric (they reach
`record` as `aux/...`), and a callback `RouterHistogram(every=Every(steps=100))`
with `after_step` reading `record["aux/router_load"]` logs them; no branch in
the loop. `hook_callback(fn, every=Every(steps=50))` turns a plain function of
the state into a callback whose metrics join the record (Levanter's `add_hook`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import optax

from tootsie.train.checkpoint import Location, wait_for_checkpoints
from tootsie.train.config import TrainConfig
from tootsie.train.rewind import DataSkips, skips_of
from tootsie.train.sharding import Layout, agree
from tootsie.train.state import TrainState, save_state

if TYPE_CHECKING:
    from tootsie.data.source import DataSource

Record = dict[str, object]
"""One step's metrics record: name -> float, list of floats, int or str."""


@dataclass(frozen=True)
class Every:
    """When a callback's `after_step` runs: every `steps` steps, or every `seconds` seconds, and/or after the last.

    `Every()` is every step.
    """

    steps: int | None = None
    """Run after step s when `s + 1` is a multiple of this."""
    seconds: float | None = None
    """Run when this many seconds passed since it last ran (process 0's clock, agreed by all processes)."""
    last: bool = False
    """Also run after the run's last step."""

    def __post_init__(self) -> None:
        if self.steps is not None and self.seconds is not None:
            raise ValueError(
                f"Every takes steps or seconds, not both (got steps={self.steps}, seconds={self.seconds}); "
                "give two callbacks for two schedules"
            )
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"Every.steps must be >= 1, got {self.steps}; e.g. Every(steps=100)")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"Every.seconds must be > 0, got {self.seconds}; e.g. Every(seconds=600)")


class Timer:
    """The clock of an `Every(seconds=...)` schedule: due once `seconds` passed since the last `reset`."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.since = seconds, time.monotonic()

    def due(self) -> bool:
        """Process 0's answer on every process (a collective: all processes ask after the same step)."""
        return agree(time.monotonic() - self.since > self.seconds)

    def reset(self) -> None:
        """Start counting again from now."""
        self.since = time.monotonic()


class Callback:
    """A training callback: override the lifecycle points you need; the others do nothing.

    `order` places it among the others (lower first); `every` schedules its `after_step`.
    """

    order: int = 50
    every: Every = Every()

    def start(self, run: Run) -> None:
        """The state is built (resumed, warm-started or fresh); nothing trained yet in this process."""

    def after_step(self, run: Run, step: int, record: Record) -> None:
        """Step `step` was trained; `record` is its metrics record, before the trackers write it."""

    def checkpoint(self, run: Run, path: Location) -> None:
        """The checkpoint at `path` is committed."""

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        """A rewind replaced `run.state` and `run.skips`; `event` is its record in rewinds.json."""

    def end(self, run: Run) -> None:
        """The run reached `config.num_steps`."""

    def error(self, run: Run, error: BaseException) -> None:
        """Training raised `error` (it is raised again after every callback saw it)."""

    def close(self, run: Run) -> None:
        """The run is over, however it ended: release what `start` opened."""


class Evaluation(Callback):
    """A callback that carries out `config.eval` (`eval.in_loop`): the loop refuses a config with `eval` and none."""

    order = 20


StepHook = Callable[[TrainState], dict[str, float]]
"""A function of the state after a step whose metrics join that step's record (see `hook_callback`)."""


class _HookCallback(Callback):
    order = 30

    def __init__(self, hook: StepHook, every: Every) -> None:
        self.hook, self.every = hook, every

    def after_step(self, run: Run, step: int, record: Record) -> None:
        record.update(self.hook(run.state))


def hook_callback(hook: StepHook, every: Every = Every()) -> Callback:
    """A callback that adds `hook(state)`'s metrics to the record on `every`'s schedule (Levanter's `add_hook`)."""
    return _HookCallback(hook, every)


class Callbacks:
    """The run's callbacks in their order, each lifecycle point dispatched to all of them."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self.items = sorted(callbacks, key=lambda callback: callback.order)
        self.started: list[Callback] = []
        self._timers = {id(c): Timer(c.every.seconds) for c in self.items if c.every.seconds is not None}

    def _due(self, callback: Callback, run: Run, step: int) -> bool:
        every = callback.every
        if every.last and step + 1 == run.config.num_steps:
            return True
        if every.seconds is None:
            return (step + 1) % (every.steps or 1) == 0
        timer = self._timers[id(callback)]
        if timer.due():
            timer.reset()
            return True
        return False

    def start(self, run: Run) -> None:
        """Every callback's `start`, in order (only the started ones are closed if one fails)."""
        for callback in self.items:
            callback.start(run)
            self.started.append(callback)

    def after_step(self, run: Run, step: int, record: Record) -> None:
        """Each due callback's `after_step`; after one rewinds, the rest are skipped and all see `rewind`."""
        for callback in self.items:
            if self._due(callback, run, step):
                callback.after_step(run, step, record)
            if run.rewound is not None:
                event, run.rewound = run.rewound, None
                for other in self.items:
                    other.rewind(run, event)
                return

    def checkpoint(self, run: Run, path: Location) -> None:
        """Every callback's `checkpoint`."""
        for callback in self.items:
            callback.checkpoint(run, path)

    def end(self, run: Run) -> None:
        """Every callback's `end`."""
        for callback in self.items:
            callback.end(run)

    def error(self, run: Run, error: BaseException) -> None:
        """Every callback's `error`."""
        for callback in self.items:
            callback.error(run, error)

    def close(self, run: Run) -> None:
        """Every started callback's `close`, all of them even when one raises (the first error is raised after)."""
        failure: BaseException | None = None
        for callback in self.started:
            try:
                callback.close(run)
            except BaseException as error:  # noqa: BLE001 - the others still close; raised below
                failure = failure or error
        if failure is not None:
            raise failure


@dataclass
class Run:
    """What the loop and its callbacks share: the config, where the run writes, its state and data position."""

    config: TrainConfig
    """The run's config."""
    output: Path
    """The directory the run writes (metrics, rewinds.json; checkpoints unless `final_output` is set)."""
    final_output: str | None
    """Where the run's checkpoints go when not under `output` (a staged step's URL)."""
    optimizer: optax.GradientTransformationExtraArgs
    """The optimizer wrapped in the stability tools (`state.build_optimizer`)."""
    layout: Layout
    """The mesh and the shardings of the state and the batch."""
    data: DataSource
    """What the steps train on."""
    state: TrainState
    """The state after the newest step (or the one a rewind went back to)."""
    events: list[dict[str, object]]
    """The run's rewinds (rewinds.json), oldest first."""
    callbacks: Callbacks
    """Every callback of the run, in order."""
    rewound: dict[str, object] | None = None
    """Set by `rewind` until the loop has told every callback."""
    _saved: Location | None = field(default=None, init=False)

    @property
    def skips(self) -> DataSkips:
        """The data windows the run's rewinds skipped."""
        return skips_of(self.events)

    def rewind(self, state: TrainState, event: dict[str, object]) -> None:
        """Continue from `state` with the rewind `event` recorded; the loop tells every callback."""
        self.state, self.events, self.rewound = state, [*self.events, event], event

    def save(self, kind: str) -> Location:
        """Start a `kind` checkpoint of the current state (after the previous one commits); return its directory."""
        self.wait_for_checkpoint()
        self._saved = save_state(self.output, self.state, self.config, kind, self.skips, self.final_output)
        return self._saved

    def wait_for_checkpoint(self) -> None:
        """Block until the run's newest checkpoint is committed, then tell every callback (`checkpoint`)."""
        wait_for_checkpoints()
        saved, self._saved = self._saved, None
        if saved is not None:
            self.callbacks.checkpoint(self, saved)
