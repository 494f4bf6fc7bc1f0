"""The quality classifier's optimizer: full-batch Adam on the class-weighted logistic loss, in one jitted scan.

Its own module so that only training imports JAX and Optax: `train_classifier`
imports it when it trains, and the datakit commands (and their spawned
workers), which import `train_classifier` for its config, never do.

Example: `fit(buckets, docs, inverse_counts, labels, weights, learning_rate=0.1, l2=1e-5, steps=200,
num_buckets=2**20)` returns the weights, the bias and the 200 losses.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Float32, Integer


def fit(
    buckets: Integer[np.ndarray, " features"],
    docs: Integer[np.ndarray, " features"],
    inverse_counts: Float[np.ndarray, " docs"],
    labels: Integer[np.ndarray, " docs"],
    sample_weights: Float32[np.ndarray, " docs"],
    *,
    learning_rate: float,
    l2: float,
    steps: int,
    num_buckets: int,
) -> tuple[Float32[Array, " buckets"], Float32[Array, ""], Float32[Array, " steps"]]:
    """Weights, bias and the loss of every step of full-batch Adam on the weighted logistic loss.

    Feature f is bucket `buckets[f]` of document `docs[f]`; a document's logit is the bias plus the mean of its
    features' weights (`inverse_counts` = 1 / its feature count)."""
    buckets_, docs_ = jnp.asarray(buckets, jnp.int32), jnp.asarray(docs, jnp.int32)
    inverse_counts_ = jnp.asarray(inverse_counts, jnp.float32)
    labels_, sample_weights_ = jnp.asarray(labels, jnp.float32), jnp.asarray(sample_weights)
    optimizer = optax.adam(learning_rate)
    num_docs = labels_.shape[0]

    def loss(params: tuple[jax.Array, jax.Array]) -> jax.Array:
        weights, bias = params
        logits = bias + jax.ops.segment_sum(weights[buckets_], docs_, num_segments=num_docs) * inverse_counts_
        data = jnp.sum(sample_weights_ * optax.sigmoid_binary_cross_entropy(logits, labels_))
        return data + 0.5 * l2 * jnp.sum(weights * weights)

    def step(carry: Any, _: None) -> tuple[Any, jax.Array]:
        params, state = carry
        value, grads = jax.value_and_grad(loss)(params)
        updates, state = optimizer.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), value

    params = (jnp.zeros(num_buckets, jnp.float32), jnp.zeros((), jnp.float32))
    (params, _), losses = jax.jit(lambda p: jax.lax.scan(step, (p, optimizer.init(p)), None, length=steps))(params)
    return params[0], params[1], losses
