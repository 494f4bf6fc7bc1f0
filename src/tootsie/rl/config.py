"""An RL run's config: a `TrainConfig` for the policy update, plus where rollouts come from and how they are scored.

An RL config file has two sections:

    train:          a TrainConfig: the policy's model and warm start (the SFT'd model), optimizer, schedule,
                    `objective: {kind: rloo | grpo | distill, ...}` and `data: {kind: supplied, seq_len,
                    batch_size}`: each update trains on one minibatch of an iteration's rollouts,
                    batch_size = prompts per iteration × group_size / rl.minibatches rows of seq_len tokens
    rl:             `RLSettings`: the tokenizer, the environment (`{kind: arithmetic, ...}`), sampling
                    (`RolloutConfig`), rewards, updates per iteration, the reference, the KL bound and
                    the held-out evaluation

`tootsie rl --config FILE --out DIR` and `tootsie train --config FILE --out
DIR` both run it (`rl.loop.run_rl`). An iteration is `updates_per_iteration`
training steps on the same rollouts, so `train.num_steps` = iterations ×
updates per iteration. With `minibatches` M > 1 the iteration's rollouts are
split into M contiguous minibatches of whole groups and step j of the iteration
trains minibatch j mod M (PPO's minibatch updates: the first is on-policy, the
later ones are slightly off it, where the ratio clipping acts). Both sections
are hashed into the run's identity (`rl_config.json` in the run directory; a
resume with another config is refused, naming the fields that changed).

Example: `tootsie rl example-config --tiny` prints a complete config over the
arithmetic task, warm-started from a small model SFT'd to the answer format.
"""

from dataclasses import dataclass, field
from typing import Protocol

from tootsie.configfile import registry_union
from tootsie.data.source import SuppliedRows
from tootsie.errors import TootsieError
from tootsie.rl.arithmetic_task import ArithmeticTaskConfig
from tootsie.rl.environments import Environment, RewardConfig, Task
from tootsie.rl.rollout import RolloutConfig
from tootsie.train.config import TrainConfig
from tootsie.train.rl_objectives import DistillObjective, GRPOObjective, RLOOObjective

RL_OBJECTIVES = (RLOOObjective, GRPOObjective, DistillObjective)
"""The objectives an RL run can train with (each computes advantages from a group's rewards)."""


class TaskSource(Protocol):
    """An environment config: tasks by split and index, and the checker that scores completions."""

    def tasks(self, split: str, start: int, count: int) -> list[Task]:
        """Tasks `start` .. `start + count - 1` of `split` ("train" or "heldout")."""
        ...

    def checker(self) -> Environment:
        """What scores a completion of these tasks."""
        ...


ENVIRONMENTS: dict[str, type] = {"arithmetic": ArithmeticTaskConfig}
"""Environment configs by name: `environment: {kind: arithmetic, seed: 0}`."""
EnvironmentChoice = registry_union(ENVIRONMENTS)


@dataclass(frozen=True)
class RLEvaluation:
    """Held-out exact match: completions of held-out tasks, before and after RL (greedy, and sampled if asked)."""

    heldout_tasks: int = 200
    """Held-out tasks scored (the first ones of the environment's held-out split)."""
    temperature: float = 0.0
    """Sampling temperature of the scored completions: 0 is greedy; 1 scores the policy's own distribution
    (what RL optimizes). Greedy exact match is always reported too."""
    samples: int = 1
    """Completions per task when sampling (a task's score is the share of them that are right)."""
    seed: int = 0
    """Seed of the sampled completions (the same for before and after, so the comparison is paired)."""
    bootstrap_samples: int = 2000
    """Paired bootstrap resamples of the tasks for the interval on the difference."""
    confidence: float = 0.95
    """Coverage of the bootstrap interval."""
    every_iterations: int | None = None
    """Also log `rl/heldout_exact_match` every this many iterations (and after the last); None: only on demand."""

    def __post_init__(self) -> None:
        if self.heldout_tasks <= 0 or self.bootstrap_samples <= 0 or self.samples <= 0:
            raise ValueError("heldout_tasks, bootstrap_samples and samples must be positive")
        if self.temperature < 0 or (self.temperature == 0 and self.samples != 1):
            raise ValueError(
                f"temperature={self.temperature}, samples={self.samples}: greedy (temperature 0) takes one sample "
                "per task; set temperature > 0 to score several"
            )
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence={self.confidence} must be in (0, 1), e.g. 0.95")
        if self.every_iterations is not None and self.every_iterations <= 0:
            raise ValueError(f"every_iterations must be positive or None, got {self.every_iterations}")


@dataclass(frozen=True)
class RLSettings:
    """Where an RL run's rollouts come from and how they are scored."""

    tokenizer: str
    """The tokenizer.json the policy was trained with (prompts are encoded after BOS; EOS ends a completion)."""
    environment: EnvironmentChoice = field(default_factory=ArithmeticTaskConfig)
    """The tasks and their checker (a registry entry, `{kind: arithmetic, ...}`)."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling: G completions per prompt, token budget, temperature, top-p, seed (EOS always stops)."""
    rewards: RewardConfig = field(default_factory=RewardConfig)
    """Reward per reason; `truncated: null` leaves truncated completions out of the update (counted, logged)."""
    first_task: int = 0
    """Iteration i samples the environment's train tasks first_task + i × P .. + P − 1 (P prompts per iteration):
    start past the tasks the starting policy was fine-tuned on."""
    updates_per_iteration: int = 1
    """Training steps on each iteration's rollouts (more than one makes the ratio clipping act); a multiple of
    `minibatches` (updates / minibatches passes over the rollouts)."""
    prompts: int | None = None
    """Prompts sampled per iteration; None: the trained ones, `train.data.batch_size` × minibatches / G. More
    than that samples extra prompts and trains on the groups whose advantages are not all 0 first (DAPO's dynamic
    sampling: a group whose rewards are all equal carries no policy gradient), filling up with the others."""
    minibatches: int = 1
    """Minibatches each iteration's rollouts are split into, of `train.data.batch_size` rows each (whole groups);
    step j of an iteration trains minibatch j mod minibatches."""
    reference: str | None = None
    """The frozen reference's checkpoint for the KL; None: the policy's warm start."""
    kl_bound: float | None = None
    """The bound stated for `rl/kl` (k3's mean KL to the reference, nats per token): an iteration above it is
    logged as a warning and counted (`rl/kl_over_bound`); None states none."""
    evaluation: RLEvaluation = field(default_factory=RLEvaluation)
    """Held-out exact match (`tootsie rl evaluate`, and in the loop every `every_iterations`)."""

    def __post_init__(self) -> None:
        if self.first_task < 0:
            raise ValueError(f"first_task must be >= 0, got {self.first_task}")
        if self.updates_per_iteration <= 0:
            raise ValueError(f"updates_per_iteration must be positive, got {self.updates_per_iteration}")
        if self.minibatches <= 0 or self.updates_per_iteration % self.minibatches:
            raise ValueError(
                f"minibatches={self.minibatches} must be positive and divide updates_per_iteration="
                f"{self.updates_per_iteration} (every minibatch is trained the same number of times)"
            )
        if self.prompts is not None and self.prompts <= 0:
            raise ValueError(f"prompts must be positive or None, got {self.prompts}")
        if self.kl_bound is not None and not self.kl_bound > 0:
            raise ValueError(f"kl_bound must be positive or None, got {self.kl_bound}")


@dataclass(frozen=True)
class RLConfig:
    """A whole RL run: the policy update (`train`) and the rollouts it trains on (`rl`)."""

    train: TrainConfig
    """The policy's training config; `data` is `{kind: supplied}` and `objective` an RL objective."""
    rl: RLSettings
    """Environment, sampling, rewards, reference, KL bound and evaluation."""

    def __post_init__(self) -> None:
        train, rl = self.train, self.rl
        problems = []
        if not isinstance(train.data, SuppliedRows):
            problems.append("train.data must be {kind: supplied, seq_len: N, batch_size: N} (rows are rollouts)")
        elif train.data.batch_size % rl.rollout.group_size:
            problems.append(
                f"train.data.batch_size={train.data.batch_size} must be a multiple of "
                f"rl.rollout.group_size={rl.rollout.group_size} (rows = prompts × group size)"
            )
        if not isinstance(train.objective, RL_OBJECTIVES):
            problems.append("train.objective must be {kind: rloo}, {kind: grpo} or {kind: distill}")
        if isinstance(train.data, SuppliedRows) and rl.prompts is not None and rl.prompts < self.groups_per_iteration:
            problems.append(
                f"rl.prompts={rl.prompts} samples fewer groups than an iteration trains ({self.groups_per_iteration} = "
                "train.data.batch_size × rl.minibatches / rl.rollout.group_size); raise it or lower batch_size"
            )
        if train.num_steps % rl.updates_per_iteration:
            problems.append(
                f"train.num_steps={train.num_steps} must be a multiple of "
                f"rl.updates_per_iteration={rl.updates_per_iteration} (steps = iterations × updates)"
            )
        if train.warm_start is None:
            problems.append("train.warm_start is unset: RL starts from a trained policy (an SFT checkpoint)")
        for name in ("rewind", "eval", "distributed"):
            if getattr(train, name) is not None:
                problems.append(f"train.{name} is not supported in an RL run; remove it")
        if problems:
            raise TootsieError("RL config: " + "; ".join(problems))

    @property
    def groups_per_iteration(self) -> int:
        """Groups trained each iteration: the rows of all its minibatches over the group size."""
        return self.train.data.batch_size * self.rl.minibatches // self.rl.rollout.group_size

    @property
    def prompts_per_iteration(self) -> int:
        """Tasks sampled each iteration: `rl.prompts`, else the groups trained."""
        return self.rl.prompts or self.groups_per_iteration

    @property
    def iterations(self) -> int:
        """Rollout iterations in the run."""
        return self.train.num_steps // self.rl.updates_per_iteration

    @property
    def reference(self) -> str:
        """The frozen reference's checkpoint: `rl.reference`, else the warm start."""
        return self.rl.reference or self.train.warm_start.checkpoint
