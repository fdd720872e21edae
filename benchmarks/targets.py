"""Benchmark-only oracles: a Potts-like oracle with a large vocabulary, a random masked MLP and
a uniform oracle (the engine's own cost per round).

The first two are *inconsistent* oracles (no single joint law answers all their queries): the
samplers then draw exactly from the law of sequential sampling along the random order, which is
all a timing needs.  They exist to measure seconds with the two costs users bring: a vocabulary
of hundreds of values, and a network whose batch-1 evaluation is bound by reading its weights.
The third answers the uniform law and costs nothing, which leaves the sampler's own cost.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core.prefix_sums import prefix_sum
from numpyro_autospec.oracles import AnyOrderOracle

__all__ = ["PottsCountOracle", "RandomMLPOracle", "UniformOracle"]


class PottsCountOracle(AnyOrderOracle):
    r"""Every free site has the law :math:`\operatorname{softmax}(\beta\, c / n + h)` where
    :math:`c \in \mathbb{N}^q` counts the pinned values: :math:`O(n + q)` per query
    (``segment_sum``).  The block form of ``L`` rows (``scores_blocks``) takes the cheaper of
    two ways to count every row's prefix, chosen from the static sizes: one ``segment_sum`` per
    row, :math:`O(L(n + q))`, or one cumulative sum of one-hot rows along the order,
    :math:`O(nq)` for the whole block.  A single row (a sequential step, a leaf) thus costs what
    the set form costs (docs/benchmarks.md, "Seconds against sequential sampling")."""

    scores_blocks = True
    #: rows cost O(n + q) each up to about n q / (n + q) rows, then O(n q) in all
    rows_per_call = 256

    def __init__(self, num_positions: int, num_categories: int, beta: float = 8.0, seed: int = 0):
        self.num_positions = int(num_positions)
        self.num_categories = int(num_categories)
        self.beta = float(beta)
        self.field = jax.random.normal(jax.random.PRNGKey(seed), (self.num_categories,))

    def _rows(self, counts: Array) -> Array:
        logits = self.beta * counts / self.num_positions + self.field
        return jax.nn.log_softmax(logits, axis=-1)

    def log_marginals(self, x: Array, mask: Array) -> Array:
        counts = jax.ops.segment_sum(mask.astype(jnp.float32), x, num_segments=self.num_categories)
        return jnp.broadcast_to(self._rows(counts), (self.num_positions, self.num_categories))

    def log_conditionals(self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array):
        n, q = self.num_positions, self.num_categories
        lengths = jnp.clip(prefix_lengths, 0, n)
        if prefix_lengths.shape[0] * (n + q) < n * q:

            def counts_of(length: Array) -> Array:
                pinned = (ranks < length).astype(jnp.float32)
                return jax.ops.segment_sum(pinned, x, num_segments=q)

            return self._rows(jax.vmap(counts_of)(lengths))
        values_in_order = jnp.zeros(n, jnp.int32).at[ranks].set(x)
        one_hot = jax.nn.one_hot(values_in_order, q, dtype=jnp.float32)
        # a prefix scan on the CPU (numpyro_autospec._core.prefix_sums), where jnp.cumsum along the
        # rows of an [n, q] array is a window sum, 3x slower here at n = 1024, q = 512
        prefix = prefix_sum(one_hot, axis=0)
        counts = jnp.concatenate([jnp.zeros((1, q)), prefix])
        return self._rows(counts[lengths])


class RandomMLPOracle(AnyOrderOracle):
    """A masked MLP with random weights, ``[one_hot(x) * mask, mask] -> hidden -> [n, q]``
    logits: at batch 1 its evaluation reads every weight once (memory-bound), the regime
    where batching a round's queries pays most."""

    def __init__(self, num_positions: int, num_categories: int = 2, hidden: int = 1024):
        self.num_positions = int(num_positions)
        self.num_categories = int(num_categories)
        n, q = self.num_positions, self.num_categories
        k1, k2 = jax.random.split(jax.random.PRNGKey(0))
        inputs = n * q + n
        self.w1 = jax.random.normal(k1, (inputs, hidden)) / jnp.sqrt(inputs)
        self.w2 = jax.random.normal(k2, (hidden, n * q)) / jnp.sqrt(hidden)

    def log_marginals(self, x: Array, mask: Array) -> Array:
        n, q = self.num_positions, self.num_categories
        pinned = jax.nn.one_hot(x, q) * mask[:, None]
        features = jnp.concatenate([pinned.reshape(-1), mask.astype(jnp.float32)])
        hidden = jax.nn.gelu(features @ self.w1)
        return jax.nn.log_softmax((hidden @ self.w2).reshape(n, q), axis=-1)


class UniformOracle(AnyOrderOracle):
    r"""Every row uniform, :math:`\log \mu(X_i = \cdot \mid \cdot) = -\log q`, in both forms:
    an oracle that costs (almost) nothing, so a round of the engine costs its own bookkeeping.
    The rows still read their inputs (multiplied by zero), so XLA cannot fold the oracle into a
    constant; ``depends_on_order`` is declared so that the engine takes the order-aware path
    of a learned network."""

    scores_blocks = True
    depends_on_order = True

    def __init__(self, num_positions: int, num_categories: int = 2):
        self.num_positions = int(num_positions)
        self.num_categories = int(num_categories)

    def _uniform(self, rows: int, reads: Array) -> Array:
        level = -jnp.log(jnp.float32(self.num_categories))
        return jnp.full((rows, self.num_categories), level) + 0.0 * reads[:, None]

    def log_marginals(self, x: Array, mask: Array) -> Array:
        return self._uniform(self.num_positions, x * mask)

    def log_conditionals(self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array):
        return self._uniform(sites.shape[0], x[sites] + ranks[sites] + prefix_lengths)
