"""A run's history: its training phases, oldest first, with step and token ranges and checkpoints.

A release starts from RUN_DIR, which is one of
- a training output directory (`checkpoints/` + `metrics.jsonl`): its newest checkpoint is released;
- a checkpoint directory (`.../checkpoints/step-N`): that checkpoint is released;
- an executor prefix holding step directories (what `tootsie demo --out D` writes): the training step
  that no other training step warm-starts from is released (an error lists them if there are several).

From the released run, `warm_start` in each training step's recorded config is
followed back to the run it started from; each run is one phase. A phase ends
where the next one branched off (a cooldown started from the pretrain's
step-300 checkpoint cuts the pretrain phase at step 300 even if it trained
further), so every phase range, checkpoint and metric listed is in the lineage
of the released weights. Token counts are cumulative: a warm start with
`reset_step` restarts its step count, and its tokens are added to the earlier
phases'. A run trained outside the executor records no config: it is one phase
starting at its first logged step.

Example (the demo): phases `pretrain` (steps 0–300, tokens 0–614,400) and
`cooldown` (steps 300–400, tokens 614,400–819,200).
"""

import dataclasses
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError
from tootsie.eval.run_chat_template import run_of_checkpoint
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.release.hf_export import read_state, revision_name, training_step
from tootsie.release.step_info import StepInfo, find_steps
from tootsie.train.checkpoint import STATE_FILE, has_tree, list_checkpoints
from tootsie.train.loading import CHECKPOINTS, resolve_checkpoint


@dataclasses.dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint in the lineage of the released weights."""

    path: Path
    step: int
    tokens: int
    """Cumulative tokens seen by the weights (earlier phases included)."""
    kind: str
    has_ema: bool

    @property
    def revision(self) -> str:
        """Marin-style revision name `step-N-tokens-T`."""
        return revision_name(self.step, self.tokens)


@dataclasses.dataclass(frozen=True)
class Phase:
    """One training run of the lineage."""

    name: str
    """Short name: the last part of the step name (`cooldown`), or the directory name."""
    directory: Path
    step: StepInfo | None
    """The executor step, when the run was one (its config is the full TrainConfig)."""
    start_step: int
    end_step: int
    start_tokens: int
    end_tokens: int
    token_offset: int
    """Cumulative tokens before this run's own count starts (non-zero after a `reset_step` warm start)."""
    checkpoints: tuple[CheckpointRecord, ...]
    warm_start: Path | None
    """The checkpoint this run started from."""

    @property
    def train_config(self) -> dict[str, Any] | None:
        """The canonical TrainConfig recorded by the executor, or None."""
        return self.step.config if self.step is not None else None

    def metrics(self) -> list[dict[str, object]]:
        """This run's metric records inside the phase's step range, tagged `"run": <phase name>`.

        Their own `phase` is the LR schedule's.
        """
        file = self.directory / METRICS_FILE
        if not file.is_file():
            return []
        return [
            {**r, "run": self.name}
            for r in read_metrics(file).records
            if self.start_step <= int(r.get("step", -1)) < self.end_step
        ]


@dataclasses.dataclass(frozen=True)
class RunHistory:
    """The phases leading to the released checkpoint."""

    phases: tuple[Phase, ...]
    final: CheckpointRecord


def final_training_step(prefix: Path) -> Path:
    """The training step directory under an executor prefix that no other training step warm-starts from."""
    runs = [s for s in find_steps(prefix) if s.type == "TrainConfig"]
    if not runs:
        raise TootsieError(
            f"{prefix} holds no training run: pass a training output directory "
            f"(with {CHECKPOINTS}/) or an executor prefix with a finished training step"
        )
    started_from = {str(r.resolve(r.config["warm_start"]["checkpoint"])) for r in runs if r.config.get("warm_start")}
    leaves = [
        r for r in runs if not any(s == str(r.directory) or s.startswith(f"{r.directory}/") for s in started_from)
    ]
    if len(leaves) != 1:
        raise TootsieError(
            f"{prefix} holds {len(leaves)} final training runs "
            f"({', '.join(r.id for r in leaves)}); pass the one to release as RUN_DIR"
        )
    return leaves[0].directory


def released_checkpoint(run_dir: str | Path) -> Path:
    """The checkpoint a release of RUN_DIR publishes (see the module docstring for the three kinds of RUN_DIR)."""
    path = Path(run_dir)
    if (path / STATE_FILE).is_file() or (path / CHECKPOINTS).is_dir():
        return Path(resolve_checkpoint(str(path)))
    if path.is_dir():
        return Path(resolve_checkpoint(str(final_training_step(path))))
    raise TootsieError(
        f"{path} is not a directory; pass a training output directory, a checkpoint or an executor prefix"
    )


def _checkpoints(run: Path, end_step: int, token_offset: int) -> tuple[CheckpointRecord, ...]:
    records = []
    for step, path in list_checkpoints(run / CHECKPOINTS):
        if step <= end_step:
            state = read_state(path)
            records.append(
                CheckpointRecord(
                    Path(path),
                    step,
                    token_offset + int(state.get("tokens", 0)),
                    str(state.get("kind", "")),
                    has_tree(path, "ema"),
                )
            )
    return tuple(records)


def _first_logged_step(run: Path) -> int:
    file = run / METRICS_FILE
    records = read_metrics(file).records if file.is_file() else []
    return min((int(r["step"]) for r in records if "step" in r), default=0)


def _phases_to(checkpoint: Path, seen: frozenset[Path]) -> list[Phase]:
    """The phases ending at `checkpoint`, oldest first, following warm starts back."""
    run = run_of_checkpoint(checkpoint).resolve()
    if run in seen:
        raise TootsieError(f"warm starts form a cycle through {run}; its recorded configs are inconsistent")
    step, state = training_step(checkpoint), read_state(checkpoint)
    end_step = int(state["step"])
    warm = step.config.get("warm_start") if step is not None else None
    earlier: list[Phase] = []
    source = None
    if warm:
        source = Path(resolve_checkpoint(str(step.resolve(warm["checkpoint"]))))
        earlier = _phases_to(source, seen | {run})
    source_state = read_state(source) if source is not None else None
    reset = bool(warm and warm.get("reset_step"))
    token_offset = earlier[-1].end_tokens if reset else (earlier[-1].token_offset if earlier else 0)
    if source_state is None:
        start_step = _first_logged_step(run) if step is None else 0
    else:
        start_step = 0 if reset else int(source_state["step"])
    name = step.name.rsplit("/", 1)[-1] if step is not None else run.name
    phase = Phase(
        name=name,
        directory=run,
        step=step,
        start_step=start_step,
        end_step=end_step,
        start_tokens=earlier[-1].end_tokens if earlier else token_offset,
        end_tokens=token_offset + int(state.get("tokens", 0)),
        token_offset=token_offset,
        checkpoints=tuple(
            c
            for c in _checkpoints(run, end_step, token_offset)
            if c.step > start_step or (source is None and c.step == start_step)
        ),
        warm_start=source,
    )
    return [*earlier, phase]


def run_history(run_dir: str | Path) -> RunHistory:
    """The phases and the released checkpoint of RUN_DIR."""
    checkpoint = released_checkpoint(run_dir)
    phases = _phases_to(checkpoint, frozenset())
    final = next(c for c in phases[-1].checkpoints if c.path.resolve() == checkpoint.resolve())
    return RunHistory(phases=tuple(phases), final=final)
