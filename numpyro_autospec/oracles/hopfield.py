"""A learned-like logistic any-order model whose site-by-site errors have random signs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = ["HopfieldOracle"]


class HopfieldOracle:
    """Patterns :math:`\\xi \\in \\{\\pm1\\}^{R\\times n}`; the conditional of a free site uses only
    the pinned sites, like a masked network:

    .. math:: \\log \\mu(s_i = s \\mid x_S) = \\log\\sigma\\big(2s\\,(h + \\beta \\textstyle\\sum_r
        \\xi_{ri}\\, m_r)\\big), \\qquad m_r = \\tfrac1n \\textstyle\\sum_{j\\in S} \\xi_{rj} s_j.

    Inconsistent (no single joint), so the sampler's law is that of sequential any-order
    sampling.  With many patterns the change of a site's field caused by drafted sites has a
    random sign: errors partly cancel over a block, so sequence-level acceptance (the paper)
    and block verification keep long blocks where site-by-site verification stops early.
    :math:`O(nR)` per query.
    """

    num_categories = 2

    def __init__(self, patterns, beta: float, h: float = 0.0) -> None:
        patterns = np.asarray(patterns, np.float32)
        if patterns.ndim != 2 or not np.all(np.abs(patterns) == 1):
            raise ValueError("patterns must be a [R, n] array of +-1")
        self.patterns = patterns
        self.num_positions = patterns.shape[1]
        self.beta = float(beta)
        self.h = float(h)

    @classmethod
    def random(cls, key: Array, num_positions: int, num_patterns: int, beta: float, h=0.0):
        signs = jax.random.rademacher(key, (num_patterns, num_positions), jnp.float32)
        return cls(np.asarray(signs), beta, h)

    def __call__(self, x: Array, mask: Array) -> Array:
        spins = jnp.where(mask, 2.0 * x.astype(jnp.float32) - 1.0, 0.0)
        overlaps = self.patterns @ spins / self.num_positions
        field = self.h + self.beta * (overlaps @ self.patterns)
        return jnp.stack([jax.nn.log_sigmoid(-2 * field), jax.nn.log_sigmoid(2 * field)], -1)
