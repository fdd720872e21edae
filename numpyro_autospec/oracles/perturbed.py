"""An inconsistent oracle for tests: a table's conditionals perturbed per mask pattern."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.oracles.table import TableOracle

__all__ = ["PerturbedOracle"]


class PerturbedOracle:
    """Perturbed conditionals
    :math:`p(\\cdot \\mid x_S) \\propto \\mu(\\cdot \\mid x_S)\\, e^{\\epsilon\\, g(S, i, \\cdot)}`
    with a fixed pseudo-random :math:`g` per mask pattern :math:`S` (noise table
    ``[2^n, n, q]`` drawn once from ``key``).  The conditionals of different masks come from
    no single joint, like a learned network's.  For a fixed order :math:`\\sigma` the
    any-order sampler's law is :math:`\\prod_k p(x_{\\sigma(k)} \\mid x_{\\sigma(<k)})`
    (:meth:`sequential_log_probs`), which is what exactness means here (ALGORITHM.md 2a).
    """

    def __init__(self, table: TableOracle, scale: float, key: Array) -> None:
        self.table = table
        self.num_positions = table.num_positions
        self.num_categories = table.num_categories
        n, q = self.num_positions, self.num_categories
        self.noise = np.asarray(scale * jax.random.normal(key, (2**n, n, q)), np.float32)
        self._powers = (2 ** np.arange(n)).astype(np.int32)

    def __call__(self, x: Array, mask: Array) -> Array:
        code = jnp.sum(jnp.where(mask, self._powers, 0))
        logits = self.table(x, mask) + jnp.asarray(self.noise)[code]
        return logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)

    def sequential_log_probs(self, order, values=None, mask=None) -> np.ndarray:
        """Exact law of any-order sampling with the fixed ``order`` (observed sites first, in
        increasing index order, pinned to ``values``), shape ``(q,)*n``."""
        n, q = self.num_positions, self.num_categories
        order = np.asarray(order)
        mask = np.zeros(n, bool) if mask is None else np.asarray(mask, bool)
        values = np.zeros(n, np.int32) if values is None else np.asarray(values, np.int32)
        full_order = np.concatenate([np.flatnonzero(mask), order[~mask[order]]])
        configs = self.table._configs
        total = np.zeros(len(configs))
        fixed = mask.copy()
        oracle = jax.jit(jax.vmap(self, (0, None)))
        for step in range(int(mask.sum()), n):
            site = full_order[step]
            answers = np.asarray(oracle(jnp.asarray(configs), jnp.asarray(fixed)), np.float64)
            total += answers[np.arange(len(configs)), site, configs[:, site]]
            fixed[site] = True
        consistent = np.all((configs == values[None]) | ~mask[None], axis=1)
        total = np.where(consistent, total, -np.inf)
        return total.reshape((q,) * n)
