"""Where a training step's batch comes from: the `DataSource` protocol the training loop draws through.

The loop never names a dataset. Each step it asks its source for the rows of
one data step (the step itself, shifted past the windows rewinds skipped),
split by rows across processes (`train.sharding.global_batch`): a source
answers `batch_shape(step)` and `batch(step, worker, num_workers)`, and must
be a pure function of the step so that a run resumes to the bit. Pretraining,
SFT and DPO read a mixture of token caches (`MixtureSource`, over
`MixtureDataset.batch(step)`); an RL rollout buffer (`tootsie.rl.buffer`) is
another source, whose config says only the rows' shape (`SuppliedRows`,
`data: {kind: supplied, ...}`) and whose rows the run's entry point supplies.

Rows carry `tokens`, `segment_ids` and `loss_mask` (`BASE_FIELDS`) and may
carry more `[rows, seq_len]` arrays: an objective names the extra fields it
trains on (`fields`, e.g. an RL objective's rollout log-probs), and the
train step passes them to its loss by name.

Example: `MixtureSource(config.data).batch(7, worker=1, num_workers=2)` gives
the second half of data step 7's rows, `tokens` of shape `[rows/2, seq_len]`.
"""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tootsie.configfile import default_kind_union
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureDataset
from tootsie.errors import TootsieError

BASE_FIELDS = ("tokens", "segment_ids", "loss_mask")
"""The arrays every source's rows hold; an objective's `fields` come after them."""


class Rows(Protocol):
    """A slice of one step's batch: `[rows, seq_len]` arrays."""

    tokens: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray


class DataSource(Protocol):
    """What a train step trains on: the rows of data step `step`, a pure function of the step."""

    def batch_shape(self, step: int) -> tuple[int, int]:
        """(rows, seq_len) of data step `step`'s whole batch."""
        ...

    def batch(self, step: int, worker: int = 0, num_workers: int = 1) -> Rows:
        """Worker `worker`'s contiguous share (of `num_workers`) of data step `step`'s rows."""
        ...


@dataclass(frozen=True)
class SuppliedRows:
    """`data: {kind: supplied}`: rows from a source the run's entry point supplies; the config fixes their shape."""

    seq_len: int
    """Tokens per row."""
    batch_size: int
    """Rows per step."""

    def __post_init__(self) -> None:
        if self.seq_len <= 0 or self.batch_size <= 0:
            raise ValueError(f"seq_len and batch_size must be positive, got {self.seq_len} and {self.batch_size}")

    @property
    def batch_schedule(self) -> BatchSchedule:
        """The same `batch_size` at every step."""
        return BatchSchedule.constant(self.batch_size)


DataChoice = default_kind_union(MixtureConfig, {"supplied": SuppliedRows})
"""A training config's data: a mixture of token caches (written without `kind:`) or `{kind: supplied, ...}`."""


def default_source(config: "MixtureConfig | SuppliedRows") -> "DataSource":
    """The source a config's data names: its mixture; supplied rows have no default (their entry point passes them)."""
    if isinstance(config, SuppliedRows):
        raise TootsieError(
            "this config's data is {kind: supplied}: its rows come from the entry point that owns them "
            "(an RL config trains with `tootsie rl --config FILE --out DIR` or `tootsie train` on the whole file)"
        )
    return MixtureSource(config)


class MixtureSource:
    """A `MixtureConfig`'s block-stratified mixture of token caches as a data source."""

    def __init__(self, config: MixtureConfig) -> None:
        self.dataset = MixtureDataset(config)

    def batch_shape(self, step: int) -> tuple[int, int]:
        """(the batch schedule's size at `step`, seq_len)."""
        return self.dataset.config.batch_schedule.batch_size(step), self.dataset.config.seq_len

    def batch(self, step: int, worker: int = 0, num_workers: int = 1) -> Rows:
        """`MixtureDataset.batch`: this worker's slice of the mixture's sequences for `step`."""
        return self.dataset.batch(step, worker, num_workers)
