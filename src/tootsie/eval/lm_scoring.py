"""Batched scoring of token sequences with a tootsie model (no lm-eval needed).

This is the log-likelihood side of the lm-eval adapter, on token ids only:
`Scorer.continuation_logprobs` scores (context, continuation) pairs for the
adapter's `loglikelihood` and `loglikelihood_rolling`. Requests are sorted by
length and padded to a fixed batch size and a power-of-two length ("bucket"),
so a task of any size compiles at most one program per bucket (log2(max_length)
of them), not one per request. Right padding is harmless: attention is causal,
so a position never sees the padding after it. A sequence longer than
`max_length` keeps its last `max_length` tokens (left truncation), as lm-eval's
own models do.

The adapter generates with the KV cache (`tootsie.models.generate`).
`Scorer.greedy_generate`, which reruns the whole padded sequence for every new
token, is kept as the reference that `benchmarks/bench_generate.py` times the
cache against.

Example: with `max_length=128`, a pair of 20 context and 3 continuation tokens
runs as one row of a `[batch_size, 32]` batch; its log-probability is the sum of
the log-softmax at the 3 positions that predict the continuation.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaModel

MIN_BUCKET = 16
"""Shortest padded length: shorter buckets save little and add compiles."""


def bucket_length(length: int, max_length: int) -> int:
    """The padded length for `length` tokens: the next power of two (at least MIN_BUCKET), capped at max_length."""
    return min(max(MIN_BUCKET, 1 << max(length - 1, 0).bit_length()), max_length)


@eqx.filter_jit
def _target_logprobs(
    model: LlamaModel, tokens: Int[Array, "batch seq"], targets: Int[Array, "batch seq"]
) -> tuple[Float[Array, "batch seq"], Bool[Array, "batch seq"]]:
    """Log-probability of each target token and whether it is the argmax, at every position."""
    logprobs = jax.nn.log_softmax(model(tokens).astype(jnp.float32), axis=-1)
    chosen = jnp.take_along_axis(logprobs, targets[..., None], axis=-1)[..., 0]
    return chosen, jnp.argmax(logprobs, axis=-1) == targets


@eqx.filter_jit
def _argmax_at(
    model: LlamaModel, tokens: Int[Array, "batch seq"], positions: Int[Array, " batch"]
) -> Int[Array, " batch"]:
    """The most likely next token after position `positions[i]` of row i."""
    logits = model(tokens)
    last = jnp.take_along_axis(logits, positions[:, None, None], axis=1)[:, 0]
    return jnp.argmax(last, axis=-1).astype(jnp.int32)


@dataclass(frozen=True)
class Scorer:
    """A model with the batch shape it is run at."""

    model: LlamaModel
    """The model scored (any weights: raw, EMA, a fresh initialization)."""
    max_length: int
    """Longest input fed to the model (its training sequence length, say); longer inputs are left-truncated."""
    batch_size: int = 8
    """Rows per forward pass; the last batch is padded with empty rows."""

    def __post_init__(self) -> None:
        if self.max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {self.max_length}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[float, bool]]:
        """For each (context, continuation): the continuation's log-probability and whether it is the greedy decode."""
        rows = []
        for index, (context, continuation) in enumerate(pairs):
            if not context or not continuation:
                raise TootsieError(
                    f"request {index} has an empty context or continuation ({len(context)=}, {len(continuation)=});"
                    " start the context with a BOS token"
                )
            if len(continuation) > self.max_length:
                raise TootsieError(
                    f"request {index}: the continuation has {len(continuation)} tokens,"
                    f" more than max_length={self.max_length}; raise max_length"
                )
            rows.append((list(context) + list(continuation))[-(self.max_length + 1) :])
        results: list[tuple[float, bool]] = [(0.0, False)] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = bucket_length(len(rows[chunk[0]]) - 1, self.max_length)
            tokens = np.zeros((self.batch_size, width), np.int32)
            targets = np.zeros((self.batch_size, width), np.int32)
            for slot, i in enumerate(chunk):
                tokens[slot, : len(rows[i]) - 1], targets[slot, : len(rows[i]) - 1] = rows[i][:-1], rows[i][1:]
            logprobs, greedy = (
                np.asarray(a) for a in _target_logprobs(self.model, jnp.asarray(tokens), jnp.asarray(targets))
            )
            for slot, i in enumerate(chunk):
                end = len(rows[i]) - 1
                span = slice(end - len(pairs[i][1]), end)
                results[i] = (float(logprobs[slot, span].sum()), bool(greedy[slot, span].all()))
        return results

    def greedy_generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], stop: Callable[[int, list[int]], bool]
    ) -> list[list[int]]:
        """Argmax-decode after each context, up to `max_new_tokens`, until `stop(request_index, generated_ids)` says so.

        Each context keeps its last `max_length - max_new_tokens` tokens, so context plus generation fits the model.
        """
        if len(contexts) != len(max_new_tokens):
            raise ValueError(f"{len(contexts)=} != {len(max_new_tokens)=}")
        budgets = [max(1, min(n, self.max_length - 1)) for n in max_new_tokens]
        prompts = [list(c)[-(self.max_length - budget) :] for c, budget in zip(contexts, budgets)]
        if any(not prompt for prompt in prompts):
            raise TootsieError("a generation request has an empty context; start the context with a BOS token")
        outputs: list[list[int]] = [[] for _ in prompts]
        order = sorted(range(len(prompts)), key=lambda i: -(len(prompts[i]) + budgets[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = bucket_length(max(len(prompts[i]) + budgets[i] for i in chunk), self.max_length)
            tokens = np.zeros((self.batch_size, width), np.int32)
            lengths = np.ones(self.batch_size, np.int32)
            for slot, i in enumerate(chunk):
                tokens[slot, : len(prompts[i])], lengths[slot] = prompts[i], len(prompts[i])
            active = set(range(len(chunk)))
            while active:
                next_ids = np.asarray(_argmax_at(self.model, jnp.asarray(tokens), jnp.asarray(lengths - 1)))
                for slot in sorted(active):
                    i = chunk[slot]
                    outputs[i].append(int(next_ids[slot]))
                    tokens[slot, lengths[slot]] = next_ids[slot]
                    lengths[slot] += 1
                    if len(outputs[i]) >= budgets[i] or stop(i, outputs[i]):
                        active.discard(slot)
        return outputs
