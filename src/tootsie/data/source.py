"""Where a training step's batch comes from: the `DataSource` protocol the training loop draws through.

The loop never names a dataset. Each step it asks its source for the rows of
one data step (the step itself, shifted past the windows rewinds skipped),
split by rows across processes (`train.sharding.global_batch`): a source
answers `batch_shape(step)` and `batch(step, worker, num_workers)`, and must
be a pure function of the step so that a run resumes to the bit. Pretraining,
SFT and DPO read a mixture of token caches (`MixtureSource`, over
`MixtureDataset.batch(step)`); an RL rollout buffer will be another source,
filled by a callback before the step that reads it.

Example: `MixtureSource(config.data).batch(7, worker=1, num_workers=2)` gives
the second half of data step 7's rows, `tokens` of shape `[rows/2, seq_len]`.
"""

from typing import Protocol

import numpy as np

from tootsie.data.mixture import MixtureConfig, MixtureDataset


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
