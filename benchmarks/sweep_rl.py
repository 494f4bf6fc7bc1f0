"""One RL variant from an RL config: change its batch, updates, learning rate or schedule, train, evaluate.

docs/rl.md's table of RL runs comes from this script: each row is one call on
the config `tootsie rl example-config` prints (or `--distill`), with the flags
in the row. It writes the variant's config to `OUT.yaml`, runs `tootsie train`
on it (a rerun resumes), then `tootsie rl evaluate`, and prints the
evaluation's JSON with the training wall time `train_s` added (also saved as
`OUT.result.json`). Iterations, updates per iteration and prompts keep the
config's step counts and batch size consistent (steps = iterations × updates,
batch = prompts × G / minibatches).

    tootsie rl example-config > rl.yaml
    .venv/bin/python benchmarks/sweep_rl.py --config rl.yaml --out runs/rl-sweep/c --prompts 64 --group-size 4 \\
        --batch-rows 128 --lr 3e-4
"""

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from tootsie.configfile import dump_config
from tootsie.jsonfile import write_json_atomic
from tootsie.rl.config import RLConfig
from tootsie.rl.loop import load_rl_config


def variant(config: RLConfig, args: argparse.Namespace) -> RLConfig:
    """`config` with the flags' changes; unset flags keep the config's values."""
    train, rl = config.train, config.rl
    updates = args.updates or rl.updates_per_iteration
    iterations = args.iterations or train.num_steps // rl.updates_per_iteration
    group = args.group_size or rl.rollout.group_size
    minibatches = args.minibatches or rl.minibatches
    prompts = args.prompts or config.groups_per_iteration
    if (prompts * group) % minibatches or updates % minibatches:
        raise SystemExit(f"--minibatches {minibatches} must divide the rows ({prompts} × {group}) and the updates")
    steps = iterations * updates
    schedule = replace(
        train.schedule,
        peak_lr=args.lr or train.schedule.peak_lr,
        warmup_steps=min(train.schedule.warmup_steps, steps - 1),
        decay_steps=train.schedule.decay_steps if args.decay_steps is None else args.decay_steps,
        total_steps=steps,
    )
    optimizer = train.optimizer if args.epsilon is None else replace(train.optimizer, epsilon=args.epsilon)
    warm_start = replace(train.warm_start, load_optimizer=True) if args.load_optimizer else train.warm_start
    train = replace(
        train,
        warm_start=warm_start,
        num_steps=steps,
        data=replace(train.data, batch_size=prompts * group // minibatches),
        schedule=schedule,
        optimizer=optimizer,
        checkpoints=replace(train.checkpoints, every_steps=steps),
    )
    rollout = replace(rl.rollout, group_size=group, batch_rows=args.batch_rows or rl.rollout.batch_rows)
    sampled = rl.prompts if args.sampled_prompts is None else args.sampled_prompts
    rl = replace(rl, rollout=rollout, updates_per_iteration=updates, minibatches=minibatches, prompts=sampled)
    return replace(config, train=train, rl=rl)


def main() -> int:
    """Write the variant's config, train it, evaluate it; print the result as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="an RL config (tootsie rl example-config)")
    parser.add_argument("--out", required=True, help="the run directory; its config is written to OUT.yaml")
    parser.add_argument("--iterations", type=int, help="RL iterations")
    parser.add_argument("--updates", type=int, help="updates per iteration (PPO epochs)")
    parser.add_argument("--minibatches", type=int, help="minibatches per iteration (one update each, of whole groups)")
    parser.add_argument("--prompts", type=int, help="prompts trained per iteration")
    parser.add_argument(
        "--sampled-prompts", type=int, help="prompts sampled per iteration (more: informative groups trained first)"
    )
    parser.add_argument("--group-size", type=int, help="completions per prompt (G)")
    parser.add_argument("--batch-rows", type=int, help="rows per generate call (the sampling seeds follow the chunks)")
    parser.add_argument("--lr", type=float, help="peak learning rate")
    parser.add_argument("--decay-steps", type=int, help="steps of the WSD schedule's final linear decay")
    parser.add_argument("--epsilon", type=float, help="AdamW's epsilon")
    parser.add_argument(
        "--load-optimizer", action="store_true", help="start from the warm start's optimizer state, not a fresh one"
    )
    args = parser.parse_args()

    out = Path(args.out)
    config_path = out.with_suffix(".yaml")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(dump_config(variant(load_rl_config(args.config), args)))
    tootsie = str(Path(sys.executable).with_name("tootsie"))
    start = time.perf_counter()
    subprocess.run([tootsie, "train", "--config", str(config_path), "--out", str(out)], check=True)
    train_s = time.perf_counter() - start
    evaluated = subprocess.run(
        [tootsie, "rl", "evaluate", "--config", str(config_path), "--out", str(out), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(evaluated.stdout) | {"train_s": round(train_s, 1), "argv": sys.argv[1:]}
    write_json_atomic(out.with_suffix(".result.json"), result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
