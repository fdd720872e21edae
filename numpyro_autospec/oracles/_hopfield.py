r"""A learned-like logistic any-order model whose site-by-site errors have random signs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import is_traced, real_parameter, register_parameters, shown
from numpyro_autospec._core.prefix_sums import prefix_sum
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles._base import AnyOrderOracle, block_indices

__all__ = ["HopfieldOracle", "hopfield_log_conditionals", "hopfield_log_marginals"]


def hopfield_log_marginals(
    patterns: Array, beta: ArrayLike, h: ArrayLike, x: Array, mask: Array
) -> Array:
    """Functional core of :class:`HopfieldOracle`: ``[n, 2]`` log conditionals, column 0 for
    :math:`s_i = -1` and column 1 for :math:`s_i = +1`; every argument may be traced."""
    patterns = jnp.asarray(patterns, jnp.float32)
    spins = jnp.where(jnp.asarray(mask, bool), 2.0 * jnp.asarray(x, jnp.float32) - 1.0, 0.0)
    overlaps = (patterns @ spins) / patterns.shape[1]
    field = h + beta * (overlaps @ patterns)
    return jnp.stack([jax.nn.log_sigmoid(-2.0 * field), jax.nn.log_sigmoid(2.0 * field)], -1)


def hopfield_log_conditionals(
    patterns: Array,
    beta: ArrayLike,
    h: ArrayLike,
    x: Array,
    ranks: Array,
    sites: Array,
    prefix_lengths: Array,
) -> Array:
    r"""Block form of :func:`hopfield_log_marginals` in one pass: ``[L, 2]``; every argument may
    be traced.  Row :math:`j` depends on its prefix only through the overlaps, read off a
    cumulative sum along the order:

    .. math:: m_r(\ell) = \frac1n \sum_{t < \ell} \xi_{r\sigma(t)}\, s_{\sigma(t)}, \qquad
        \log p(s_{s_j} = s \mid \cdot) = \log\sigma\Big(2s\,\big(h + \beta \sum_r
        \xi_{r s_j}\, m_r(\ell_j)\big)\Big).

    :math:`O(nR + LR)` time and memory for ``L`` rows."""
    patterns = jnp.asarray(patterns, jnp.float32)
    n = patterns.shape[1]
    ranks, prefix_lengths = block_indices(ranks, prefix_lengths, n)
    spins = 2.0 * jnp.asarray(x, jnp.float32) - 1.0
    order = jnp.zeros(n, jnp.int32).at[ranks].set(jnp.arange(n, dtype=jnp.int32))
    steps = (patterns * spins[None, :])[:, order].T  # [n, R], step t's term of every overlap
    prefix_overlaps = jnp.concatenate([jnp.zeros((1, patterns.shape[0])), prefix_sum(steps, 0)])
    overlaps = prefix_overlaps[prefix_lengths] / n  # [L, R]
    field = h + beta * jnp.sum(overlaps * patterns[:, jnp.asarray(sites, jnp.int32)].T, axis=1)
    return jnp.stack([jax.nn.log_sigmoid(-2.0 * field), jax.nn.log_sigmoid(2.0 * field)], -1)


# through ``jit``: an eager call compiles once per shape (inlined inside an outer ``jit``)
_jitted_log_marginals = jax.jit(hopfield_log_marginals)
_jitted_log_conditionals = jax.jit(hopfield_log_conditionals)


@register_parameters(("patterns", "beta", "h"), ("num_positions",))
class HopfieldOracle(AnyOrderOracle):
    r"""A logistic any-order model built on Hopfield patterns; inconsistent like a network.

    Patterns :math:`\xi \in \{-1, +1\}^{R \times n}`, spins :math:`s_i = 2x_i - 1`, pinned sites
    :math:`S` (as a masked network sees them), :math:`\sigma` the logistic function:

    .. math:: \log p(s_i = s \mid x_S) = \log \sigma\Big(2s\,\big(h + \beta \sum_{r=1}^{R}
        \xi_{ri}\, m_r\big)\Big), \qquad m_r = \frac1n \sum_{j \in S} \xi_{rj} s_j,

    :math:`O(nR)` per query, one :math:`O(nR + LR)` pass for a block of ``L`` rows
    (:func:`hopfield_log_conditionals`).  These conditionals come from no single joint, so the
    sampler's law is that of sequential any-order sampling (docs/algorithm.md, section 2a).
    With many patterns, site-by-site errors have random signs and partly cancel over a block:
    sequence-level acceptance (Anari et al., arXiv:2511.07869) keeps long blocks where
    site-by-site verification stops early.  A pytree: :math:`\xi`, :math:`\beta` and :math:`h`
    may be traced; concrete values are checked.

    :param patterns: :math:`\xi`, shape ``[R, n]``, entries :math:`\pm 1`.
    :param beta: coupling strength :math:`\beta`, a finite scalar.
    :param h: external field :math:`h`, a finite scalar.

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> oracle = HopfieldOracle(np.ones((1, 4)), beta=2.0)
    >>> answer = oracle(jnp.ones(4, jnp.int32), jnp.array([True, True, False, False]))
    >>> np.exp(np.asarray(answer[3], float)).round(4).tolist()  # sigma(+-2 * beta * 2/4)
    [0.1192, 0.8808]
    >>> HopfieldOracle.random(jax.random.PRNGKey(0), 16, 3, beta=1.0).patterns.shape
    (3, 16)
    """

    num_categories: int = 2
    scores_blocks = True

    def __init__(self, patterns: ArrayLike, beta: ArrayLike, h: ArrayLike = 0.0) -> None:
        shape = np.shape(patterns)
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise OracleError(
                f"HopfieldOracle: patterns must have shape [R, n] with R, n >= 1, got {shape}"
            )
        owner = "HopfieldOracle"
        patterns = real_parameter(patterns, "patterns", owner=owner, dtype=np.float32)
        if not is_traced(patterns) and not np.all(np.abs(patterns) == 1):
            bad = np.argwhere(np.abs(patterns) != 1)[0]
            raise OracleError(
                f"HopfieldOracle: patterns must hold only -1 and +1, got "
                f"patterns[{bad[0]}, {bad[1]}] = {patterns[tuple(bad)]}"
            )
        self.patterns = patterns
        self.num_positions: int = int(shape[1])
        self.beta = real_parameter(beta, "beta", owner=owner, shape=())
        self.h = real_parameter(h, "h", owner=owner, shape=())

    @classmethod
    def random(
        cls, key: Array, num_positions: int, num_patterns: int, beta: float, h: float = 0.0
    ) -> HopfieldOracle:
        """Independent uniform :math:`\\pm 1` patterns, shape ``[num_patterns, num_positions]``."""
        signs = jax.random.rademacher(key, (num_patterns, num_positions), jnp.float32)
        return cls(signs if is_traced(signs) else np.asarray(signs), beta, h)

    def __repr__(self) -> str:
        return (
            f"HopfieldOracle(num_patterns={self.patterns.shape[0]}, "
            f"num_positions={self.num_positions}, beta={shown(self.beta)}, h={shown(self.h)})"
        )

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """Log conditionals ``[n, 2]``: column 0 is :math:`s_i = -1`, column 1 is :math:`+1`."""
        return _jitted_log_marginals(self.patterns, self.beta, self.h, x, mask)

    def log_conditionals(
        self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array
    ) -> Array:
        """``[L, 2]`` block form in one pass (:func:`hopfield_log_conditionals`)."""
        return _jitted_log_conditionals(
            self.patterns, self.beta, self.h, x, ranks, sites, prefix_lengths
        )
