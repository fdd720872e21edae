"""An explicit joint table over :math:`[q]^n` (small ``n``): the exact teaching target."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = ["TableOracle"]


class TableOracle:
    """Exact conditionals of an explicit joint :math:`\\mu` given as log-weights of shape
    ``(q,)*n`` (normalized here; ``-inf`` allowed):

    .. math:: \\mu(X_i = v \\mid X_S = x_S) \\propto \\sum_{y:\\, y_S = x_S,\\, y_i = v} \\mu(y).

    Enumerates the :math:`q^n` configurations, so it is meant for :math:`q^n \\lesssim 10^5`.

    >>> import numpy as np, jax.numpy as jnp
    >>> oracle = TableOracle(np.log(np.full((2, 2), 0.25)))
    >>> np.exp(oracle(jnp.zeros(2, jnp.int32), jnp.array([True, False])))[1].round(2).tolist()
    [0.5, 0.5]
    """

    def __init__(self, log_probs) -> None:
        log_probs = np.asarray(log_probs, np.float64)
        if log_probs.ndim < 1 or len(set(log_probs.shape)) != 1:
            raise ValueError(f"log_probs must have shape (q,)*n, got {log_probs.shape}")
        if np.any(np.isnan(log_probs)) or np.any(log_probs == np.inf):
            raise ValueError("log_probs must not contain NaN or +inf")
        if np.all(log_probs == -np.inf):
            raise ValueError("log_probs is -inf everywhere: the joint has no mass")
        finite_max = np.max(log_probs)
        total = finite_max + np.log(np.sum(np.exp(log_probs - finite_max)))
        self.num_positions = log_probs.ndim
        self.num_categories = log_probs.shape[0]
        self.log_probs = (log_probs - total).astype(np.float32)
        n, q = self.num_positions, self.num_categories
        self._configs = np.array(list(itertools.product(range(q), repeat=n)), np.int32)
        self._onehot = self._configs[:, :, None] == np.arange(q)[None, None, :]
        self._flat = self.log_probs.reshape(-1)

    def __call__(self, x: Array, mask: Array) -> Array:
        consistent = jnp.all((self._configs == x[None, :]) | ~mask[None, :], axis=1)
        weights = jnp.where(consistent, self._flat, -jnp.inf)
        marginals = jax.nn.logsumexp(
            jnp.where(self._onehot, weights[:, None, None], -jnp.inf), axis=0
        )
        return marginals - jax.nn.logsumexp(marginals, axis=-1, keepdims=True)

    def log_prob(self, x: Array) -> Array:
        """Exact joint log-probability of a configuration."""
        index = jnp.ravel_multi_index(
            tuple(jnp.asarray(x).T), (self.num_categories,) * self.num_positions, mode="clip"
        )
        return jnp.asarray(self._flat)[index]

    def conditional_log_probs(self, values, mask) -> np.ndarray:
        """Exact law of the whole vector given the observed entries, shape ``(q,)*n``
        (``-inf`` off the observed values)."""
        values, mask = np.asarray(values), np.asarray(mask, bool)
        consistent = np.all((self._configs == values[None]) | ~mask[None], axis=1)
        weights = np.where(consistent, self._flat.astype(np.float64), -np.inf)
        if not np.any(np.isfinite(weights)):
            raise ValueError("the observed values have probability zero under the table")
        weights = weights - np.logaddexp.reduce(weights[np.isfinite(weights)])
        return weights.reshape(self.log_probs.shape)
