"""The Curie-Weiss (mean-field Ising) model with exact any-order conditionals in O(n)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.scipy.special import gammaln

__all__ = ["CurieWeissOracle"]


class CurieWeissOracle:
    """Spins :math:`s_i = 2x_i - 1`, :math:`\\mu(x) \\propto \\exp(\\tfrac{\\beta}{2n} M^2 + hM)`,
    :math:`M = \\sum_i s_i`.

    Given pinned sites with spin sum :math:`M_S` and :math:`r` other free sites, a free site's
    conditional sums over the number :math:`j` of up-spins among the others:

    .. math:: \\mu(s_i = s \\mid x_S) \\propto \\sum_{j=0}^{r} \\binom{r}{j}
        \\exp\\big(\\tfrac{\\beta}{2n}(M_S + s + 2j - r)^2 + h(s + 2j - r)\\big),

    computed with log-binomials in :math:`O(n)` per query (all free sites share the row).
    ``beta = 1`` is the critical point, where the magnetization fluctuates like
    :math:`n^{3/4}`; Anari et al. (arXiv:2511.07869) use such mean-field targets to illustrate
    the pinning lemma.

    >>> import jax.numpy as jnp
    >>> oracle = CurieWeissOracle(8, beta=1.0)
    >>> oracle(jnp.zeros(8, jnp.int32), jnp.zeros(8, bool)).shape
    (8, 2)
    """

    num_categories = 2

    def __init__(self, num_positions: int, beta: float, h: float = 0.0) -> None:
        if int(num_positions) < 1:
            raise ValueError(f"num_positions must be >= 1, got {num_positions}")
        self.num_positions = int(num_positions)
        self.beta = float(beta)
        self.h = float(h)

    def _log_weight(self, total: Array, free_sum: Array) -> Array:
        return self.beta / (2 * self.num_positions) * total**2 + self.h * free_sum

    def __call__(self, x: Array, mask: Array) -> Array:
        n = self.num_positions
        spins = 2.0 * x.astype(jnp.float32) - 1.0
        pinned_sum = jnp.sum(jnp.where(mask, spins, 0.0))
        others = (n - jnp.sum(mask) - 1).astype(jnp.float32)  # free sites besides i
        others = jnp.maximum(others, 0.0)
        j = jnp.arange(n, dtype=jnp.float32)
        log_binomial = (
            gammaln(others + 1) - gammaln(j + 1) - gammaln(jnp.maximum(others - j, 0) + 1)
        )
        valid = j <= others

        def log_mass(spin):
            free_sum = spin + 2 * j - others
            terms = log_binomial + self._log_weight(pinned_sum + free_sum, free_sum)
            return jax.nn.logsumexp(jnp.where(valid, terms, -jnp.inf))

        row = jnp.stack([log_mass(-1.0), log_mass(1.0)])
        row = row - jax.nn.logsumexp(row)
        return jnp.broadcast_to(row, (n, 2))

    def magnetization_log_probs(self) -> np.ndarray:
        """Exact law of the number of up spins ``k = sum(x)`` (``M = 2k - n``), k = 0..n."""
        return self.magnetization_log_probs_given(
            np.zeros(self.num_positions, np.int32), np.zeros(self.num_positions, bool)
        )

    def magnetization_log_probs_given(self, values, mask) -> np.ndarray:
        """Exact law of the number of up spins among the free sites given the pinned ones."""
        values, mask = np.asarray(values), np.asarray(mask, bool)
        n = self.num_positions
        free = int(n - mask.sum())
        pinned_sum = float(np.sum(2.0 * values[mask] - 1.0))
        k = np.arange(free + 1, dtype=np.float64)
        log_factorial = np.array([math.lgamma(v + 1.0) for v in range(free + 1)])
        log_binomial = log_factorial[free] - log_factorial - log_factorial[::-1]
        free_sum = 2 * k - free
        total = pinned_sum + free_sum
        log_p = log_binomial + self.beta / (2 * n) * total**2 + self.h * free_sum
        return log_p - np.logaddexp.reduce(log_p)

    def log_prob(self, x: Array) -> Array:
        """Exact joint log-probability."""
        n = self.num_positions
        k = jnp.sum(jnp.asarray(x), axis=-1)
        law = jnp.asarray(self.magnetization_log_probs())
        return law[k] - (gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0))
