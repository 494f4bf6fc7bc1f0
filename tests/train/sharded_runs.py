"""Train one config on several meshes in a row, in one process (test_sharding.py runs this with 8 fake CPU devices).

Usage: `python sharded_runs.py CONFIG.yaml OUT:DATA:FSDP:TENSOR:STEPS ...`; a later run on the
same OUT resumes from that directory's newest checkpoint, so `run:2:4:1:3 run:8:1:1:5` writes a
checkpoint on a 2 × 4 mesh at step 3 and resumes it on 8 × 1 to step 5. XLA_FLAGS must be set
before JAX starts, hence a separate process.
"""

import sys
from dataclasses import replace

from tootsie.configfile import load_config
from tootsie.eval.training import run_training
from tootsie.train.config import TrainConfig
from tootsie.train.sharding import MeshConfig


def main(config_file: str, runs: list[str]) -> None:
    """Train `config_file` for each `OUT:DATA:FSDP:TENSOR:STEPS` in order."""
    config = load_config(config_file, TrainConfig, root="train")
    for run in runs:
        out, data, fsdp, tensor, steps = run.split(":")
        mesh = MeshConfig(data=int(data), fsdp=int(fsdp), tensor=int(tensor))
        run_training(replace(config, mesh=mesh, num_steps=int(steps)), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
