"""Checkpoint write and restore of the 125M preset's state (fp32 params + Adam mu and nu): new format vs old.

- `new`: `tootsie.train.checkpoint` (zarr v3 on TensorStore, each process its
  own shards, asynchronous). Write seconds run from the call to the commit
  marker (`state.json`), so they include the background part; `blocking`
  is the part training waits for (copying this process's shards to host).
  Restore reads every tree into the templates' shardings.
- `old`: the format before issue 16, as the trainer wrote it: gather the
  state to host (`sharding.gather`), `safetensors.numpy.save_file` per tree,
  then `state.json`, synchronously; restore reads each tensor from the files.

Each measurement runs in a fresh process (this script with `--worker`), so
peak RSS (`ru_maxrss`) is that operation's alone; `base` is the RSS after the
state was built and before the operation, `peak - base` what the operation
added. Repeats interleave the formats (new write, old write, new restore, old
restore, then again) and the table shows medians. One process, one device
(CPU): a per-process figure; with N processes each writes 1/N of the shards.

    python benchmarks/bench_checkpoint.py --repeats 3 --dir /tmp/bench-ckpt
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

FORMATS = ("new", "old")


def _rss_mb() -> float:
    """Resident set size of this process now, in MB (from /proc)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _state():
    """(params, opt_state) of the 125M preset: its initialized params and an AdamW state filled like after a step."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    from tootsie.models.llama import LlamaModel
    from tootsie.models.presets import PRESETS

    params = eqx.filter(LlamaModel(PRESETS["125m"], key=jax.random.PRNGKey(0)), eqx.is_array)
    opt_state = optax.adamw(1e-3).init(params)
    opt_state = jax.tree.map(lambda x: x + jnp.asarray(0.5, x.dtype) if x.ndim else x, opt_state)
    return params, opt_state


def worker(fmt: str, op: str, directory: Path) -> dict[str, float]:
    """Run one write or restore of `fmt` in this process; return seconds and RSS figures."""
    import jax
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from tootsie.train.checkpoint import (
        flatten_arrays,
        load_checkpoint,
        start_checkpoint,
        wait_for_checkpoints,
    )
    from tootsie.train.sharding import gather

    params, opt_state = _state()
    trees = {"model": params, "opt_state": opt_state}
    jax.block_until_ready(trees)
    base = _rss_mb()
    started = time.perf_counter()
    figures: dict[str, float] = {}
    if op == "write" and fmt == "new":
        start_checkpoint(directory, 1, trees, {"kind": "permanent"})
        figures["blocking_s"] = time.perf_counter() - started
        wait_for_checkpoints()
    elif op == "write":
        step = directory / "step-000001"
        step.mkdir(parents=True)
        for name, tree in gather(trees).items():
            save_file(flatten_arrays(tree), str(step / f"{name}.safetensors"))
        (step / "state.json").write_text(json.dumps({"step": 1, "kind": "permanent"}))
    elif fmt == "new":
        jax.block_until_ready(load_checkpoint(directory / "step-000001", trees)[0])
    else:
        for name, tree in trees.items():
            with safe_open(str(directory / "step-000001" / f"{name}.safetensors"), framework="numpy") as handle:
                restored = {key: jax.numpy.asarray(handle.get_tensor(key)) for key in flatten_arrays(tree)}
            jax.block_until_ready(restored)
    figures["seconds"] = time.perf_counter() - started
    figures["base_mb"] = base
    figures["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    figures["bytes"] = float(sum(np.asarray(x).nbytes for x in jax.tree.leaves(trees)))
    return figures


def _run(fmt: str, op: str, directory: Path) -> dict[str, float]:
    """One measurement in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--worker", fmt, op, str(directory)],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Interleaved repeats of every (format, operation); print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/tootsie-bench-checkpoint"))
    parser.add_argument("--worker", nargs=3, metavar=("FORMAT", "OP", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        fmt, op, directory = args.worker
        print(json.dumps(worker(fmt, op, Path(directory))))
        return
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for fmt in FORMATS:
            shutil.rmtree(args.dir / fmt, ignore_errors=True)
            results.setdefault((fmt, "write"), []).append(_run(fmt, "write", args.dir / fmt))
        for fmt in FORMATS:
            results.setdefault((fmt, "restore"), []).append(_run(fmt, "restore", args.dir / fmt))
    size = results[("new", "write")][0]["bytes"] / 1e9
    print(f"125M preset params + AdamW mu/nu, fp32: {size:.2f} GB; medians of {args.repeats} interleaved repeats")
    print(f"{'format':8}{'op':9}{'seconds':>9}{'blocking s':>12}{'base MB':>9}{'peak MB':>9}{'peak-base':>10}")
    for (fmt, op), runs in sorted(results.items(), key=lambda item: (item[0][1] != "write", item[0][0])):
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        blocking = f"{median['blocking_s']:.2f}" if "blocking_s" in median else "-"
        print(
            f"{fmt:8}{op:9}{median['seconds']:9.2f}{blocking:>12}{median['base_mb']:9.0f}"
            f"{median['peak_mb']:9.0f}{median['peak_mb'] - median['base_mb']:10.0f}"
        )
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
