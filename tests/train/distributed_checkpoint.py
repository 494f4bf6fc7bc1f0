"""One process of a multi-process checkpoint: what it writes and how its memory grows (test_distributed_checkpoint.py).

Usage: `python distributed_checkpoint.py CONFIG.yaml OUT` with $TOOTSIE_COORDINATOR_ADDRESS,
$TOOTSIE_NUM_PROCESSES, $TOOTSIE_PROCESS_ID and XLA_FLAGS (the fake device count) set. Every process
builds the run's freshly initialized state on the config's mesh, then checkpoints it through the
trainer's own `save_state` and waits for the commit. It prints one JSON line: the bytes of the
shards this process holds (one replica of each) and of the whole state, the bytes it wrote (`wchar`
of /proc/self/io), its resident memory before, at the peak (VmHWM, reset just before) and after
the checkpoint, and the seconds until `save_state` returned and until the commit.
"""

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from tootsie.configfile import load_config
from tootsie.train.checkpoint import wait_for_checkpoints
from tootsie.train.config import TrainConfig
from tootsie.train.sharding import initialize_distributed
from tootsie.train.state import TrainState, build_layout, build_optimizer, initial_state, save_state


def _status_bytes(field: str) -> int:
    """A `kB` field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _written_bytes() -> int:
    """Bytes this process has passed to write calls so far (`wchar`, every thread counted)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["wchar"])


def _reset_peak() -> None:
    """Set VmHWM (the peak resident memory) back to the current VmRSS (Linux: 5 written to /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def _shard_bytes(tree: Any) -> tuple[int, int]:
    """(bytes of the shards this process holds, one replica of each; bytes of the whole arrays)."""
    own = total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        total += leaf.nbytes
        own += sum(shard.data.nbytes for shard in leaf.addressable_shards if shard.replica_id == 0)
    return own, total


def _nonzero(state: TrainState) -> TrainState:
    """`state` + 1 everywhere, shardings kept: fresh Adam moments are zero, and zarr skips chunks equal to its fill."""
    bump = jax.jit(lambda tree: jax.tree_util.tree_map(lambda leaf: leaf + jnp.ones((), leaf.dtype), tree))
    params, static = eqx.partition(state.model, eqx.is_array)
    params, opt_state, ema = jax.block_until_ready(bump((params, state.opt_state, state.ema)))  # nothing in flight
    return TrainState(eqx.combine(params, static), opt_state, ema, state.step)


def main(config_file: str, out: str) -> None:
    """Initialize the run's state on every process, checkpoint it once, and print this process's figures."""
    config = load_config(config_file, TrainConfig, root="train")
    initialize_distributed(config.distributed)
    optimizer = build_optimizer(config)
    state = _nonzero(initial_state(config, optimizer, Path(out), build_layout(config, optimizer)))
    own, total = _shard_bytes((eqx.filter(state.model, eqx.is_array), state.opt_state, state.ema))
    gc.collect()  # the initial state's buffers go now, not during the measurement
    _reset_peak()
    before, written, started = _status_bytes("VmRSS"), _written_bytes(), time.perf_counter()
    save_state(Path(out), state, config, "permanent")
    returned = time.perf_counter() - started
    wait_for_checkpoints()
    seconds, peak = time.perf_counter() - started, _status_bytes("VmHWM")
    figures = {
        "process": jax.process_index(),
        "own_shard_bytes": own,
        "state_bytes": total,
        "written_bytes": _written_bytes() - written,
        "rss_before": before,
        "rss_peak": peak,
        "rss_after": _status_bytes("VmRSS"),
        "rss_growth": peak - before,
        "save_returned_s": round(returned, 3),
        "committed_s": round(seconds, 3),
    }
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
