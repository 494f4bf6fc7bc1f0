"""The RL loop: rollout, scoring and update per iteration, on the one training loop every run uses.

`run_rl(config, out)` trains `config.train` through `eval.training.run_training`
with a `RolloutBuffer` as both the data source and a callback: each iteration
the buffer samples the iteration's prompts with the current policy, scores
them and stores the shard (`rollouts/iter_NNNNNN_seed_S.parquet`), and the
next `updates_per_iteration` steps train the configured objective (`rloo`,
`grpo`, `distill`) on it. A temporary checkpoint follows every iteration
(only the newest is kept; `train.checkpoints.every_steps` keeps permanent
ones), so a run killed anywhere resumes bit-identically: the policy is
restored to the step its iteration samples at, a missing shard is resampled
from the same seed and an existing one is reused.

Besides the train config's own record (`config.json`), the run keeps
`rl_config.json`, the `rl` section; a resume whose `rl` section changed is
refused, naming the fields, unless `allow_config_change` (the change is then
appended to `config_changes.jsonl`, as for the train section).

Example: `run_rl(load_rl_config("rl.yaml"), "runs/rl")` trains to
`train.num_steps`, logging `rl/reward_mean`, `rl/kl`, `rl/truncated_fraction`
(and the rest of `RolloutStats.metrics`) to `runs/rl/metrics.jsonl`.
"""

import json
from dataclasses import replace
from pathlib import Path

from tootsie.configfile import load_config, read_yaml, to_plain
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.jsonfile import write_json_atomic
from tootsie.rl.buffer import RolloutBuffer
from tootsie.rl.config import RLConfig
from tootsie.rl.evaluate import HeldoutExactMatch
from tootsie.train.checkpoint import latest_checkpoint
from tootsie.train.config_drift import config_diff, describe_diff
from tootsie.train.loading import checkpoint_root
from tootsie.train.state import TrainState

RL_CONFIG_FILE = "rl_config.json"
"""The `rl` section of the run's config, as first trained."""
CHANGES_FILE = "config_changes.jsonl"


def is_rl_config_file(path: str | Path) -> bool:
    """Whether a config file is an RL config (`train:` and `rl:` sections) rather than a plain TrainConfig."""
    plain = read_yaml(path)
    return isinstance(plain, dict) and "rl" in plain and "train" in plain


def load_rl_config(path: str | Path) -> RLConfig:
    """Read an RL config file (YAML or JSON)."""
    return load_config(path, RLConfig, root="rl_config")


def check_rl_section(output: Path, config: RLConfig, allow_change: bool) -> None:
    """Record the `rl` section, or refuse a resume that changed it (unless allowed, then record the change)."""
    path, plain = output / RL_CONFIG_FILE, to_plain(config.rl)
    resuming = latest_checkpoint(checkpoint_root(output)) is not None
    if resuming and path.is_file():
        changes = config_diff(json.loads(path.read_text(encoding="utf-8")), plain)
        if changes and not allow_change:
            raise TootsieError(
                f"{output} was trained with another rl section:\n{describe_diff(changes)}\n"
                "use a new --out, restore the config, or pass --allow-config-change to continue with it"
            )
        if changes:
            with (output / CHANGES_FILE).open("a", encoding="utf-8") as log:
                log.write(json.dumps({"section": "rl", "changes": changes}) + "\n")
    output.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, plain)


def run_rl(config: RLConfig, output: str | Path, allow_config_change: bool = False) -> TrainState | None:
    """Train the RL run `config` into `output`, resuming from its newest checkpoint; the final state."""
    output = Path(output)
    check_rl_section(output, config, allow_config_change)
    updates = config.rl.updates_per_iteration
    train = replace(config.train, checkpoints=replace(config.train.checkpoints, temporary_every_steps=updates))
    buffer = RolloutBuffer(config, output)
    evaluation = [HeldoutExactMatch(config, buffer.codec)] if config.rl.evaluation.every_iterations is not None else []
    return run_training(
        train, str(output), allow_config_change=allow_config_change, callbacks=[buffer, *evaluation], data=buffer
    )
