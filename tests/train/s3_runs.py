"""Train one config as an executor step on an object-store prefix, on a given mesh (test_s3_checkpoints.py runs this).

Usage: `python s3_runs.py CONFIG.yaml PREFIX DATA FSDP [HOLD_STEP RELEASE_FILE]`, with XLA_FLAGS (the
fake device count) and the S3 endpoint in the environment. With HOLD_STEP the run stops after that
many steps, touches `RELEASE_FILE.held` and waits until RELEASE_FILE exists (or is killed), so a test
can look at the bucket while the run is alive. The mesh is not hashed: every mesh trains the same
step output, so a later call resumes from the checkpoints an earlier one left in the bucket.
"""

import sys
import time
from dataclasses import replace
from pathlib import Path

from tootsie.configfile import load_config
from tootsie.eval.training import run_training
from tootsie.executor import Step, failure_summary, run_experiment
from tootsie.executor.step import direct_outputs
from tootsie.train.config import TrainConfig
from tootsie.train.loading import CHECKPOINTS
from tootsie.train.sharding import MeshConfig
from tootsie.train.state import TrainState

HOLD_SECONDS = 300
_hold: tuple[int, Path] | None = None


def _held(state: TrainState) -> dict[str, float]:
    """The step hook: after `_hold`'s step, wait for its release file."""
    if _hold is not None and state.step == _hold[0]:
        Path(f"{_hold[1]}.held").touch()
        deadline = time.monotonic() + HOLD_SECONDS
        while not _hold[1].exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{_hold[1]} did not appear within {HOLD_SECONDS} s")
            time.sleep(0.05)
    return {}


@direct_outputs(CHECKPOINTS)
def train(config: TrainConfig, output_path: str, final_output: str) -> None:
    """The step function: `run_training` with the hold hook, checkpoints straight to the step's URL."""
    run_training(config, output_path, hooks=(_held,), final_output=final_output)


def main(config_file: str, prefix: str, data: int, fsdp: int, hold: tuple[int, Path] | None) -> int:
    """Run the training step under `prefix` on a data × fsdp mesh; 0 when it succeeded."""
    global _hold
    _hold = hold
    config = replace(load_config(config_file, TrainConfig, root="train"), mesh=MeshConfig(data=data, fsdp=fsdp))
    report = run_experiment([Step("s3test/train", train, config)], prefix)
    if not report.ok:
        print(failure_summary(report), file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(
        main(args[0], args[1], int(args[2]), int(args[3]), (int(args[4]), Path(args[5])) if len(args) > 4 else None)
    )
