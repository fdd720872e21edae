r"""The Curie-Weiss (mean-field Ising) model with exact any-order conditionals in O(n)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.scipy.special import gammaln
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import (
    concrete_value,
    is_traced,
    real_parameter,
    register_parameters,
    shown,
)
from numpyro_autospec._core.prefix_sums import prefix_sum
from numpyro_autospec.errors import OracleError, positive_integer
from numpyro_autospec.oracles._base import AnyOrderOracle, block_indices
from numpyro_autospec.oracles._validation import check_observed

__all__ = ["CurieWeissOracle", "curie_weiss_log_conditionals", "curie_weiss_log_marginals"]


def _log_binomials(count: int) -> np.ndarray:
    """``log C(count, k)`` for ``k = 0..count`` in float64."""
    log_factorial = np.array([math.lgamma(k + 1.0) for k in range(count + 1)])
    return log_factorial[count] - log_factorial - log_factorial[::-1]


def curie_weiss_log_marginals(beta: ArrayLike, h: ArrayLike, x: Array, mask: Array) -> Array:
    """Functional core of :class:`CurieWeissOracle` (``n = x.shape[0]``); ``beta`` and ``h``
    may be traced: with site 1 pinned up, :math:`\\log p(s_0 = +1) = \\log\\sigma(\\beta)`, of slope
    :math:`1 - \\sigma(1)` at :math:`\\beta = 1`:

    >>> x, mask = jnp.array([0, 1]), jnp.array([False, True])
    >>> round(float(jax.grad(lambda b: curie_weiss_log_marginals(b, 0.0, x, mask)[0, 1])(1.0)), 3)
    0.269
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask, bool)
    n = x.shape[0]
    pinned_sum = jnp.sum(jnp.where(mask, 2 * x.astype(jnp.int32) - 1, 0))
    others = jnp.maximum(n - 1 - jnp.sum(mask.astype(jnp.int32)), 0)
    ups = jnp.arange(n, dtype=jnp.int32)  # up-spins among the other free sites
    valid = ups <= others
    # log C(r, j) without the constant lgamma(r + 1), which would cost float32 precision
    log_binomial = -gammaln((ups + 1).astype(jnp.float32)) - gammaln(
        (jnp.where(valid, others - ups, 0) + 1).astype(jnp.float32)
    )
    rest_sum = (pinned_sum + 2 * ups - others).astype(jnp.float32)  # T_j, exact integers
    # (beta/2n)(T+s)^2 + h(T+s) = [(beta/2n) T^2 + hT] + s (beta T/n + h) + const.
    common = log_binomial + beta / (2 * n) * rest_sum**2 + h * rest_sum
    common = jnp.where(valid, common, -jnp.inf)
    # terms reach ~n in size: centered, so both logsumexps keep float32 precision
    common = common - jnp.max(common)
    tilt = beta / n * rest_sum + h
    row = jnp.stack([jax.nn.logsumexp(common - tilt), jax.nn.logsumexp(common + tilt)])
    row = row - jax.nn.logsumexp(row)
    return jnp.broadcast_to(row[None, :], (n, 2))


#: elements of one chunk of the block form's ``[rows, n]`` computation (4 MB, stays in cache)
_CHUNK_ELEMENTS = 1 << 20

#: up to this many rows, one masked sum per row (``O(Ln)``) beats a prefix sum (``O(n)``)
_MASKED_ROWS = 4


@functools.lru_cache(maxsize=16)
def _log_factorials(count: int) -> np.ndarray:
    """``log k!`` for ``k = 0..count`` (float32, from float64), a constant of the program."""
    return np.array([math.lgamma(k + 1.0) for k in range(count + 1)], np.float32)


def curie_weiss_log_conditionals(
    beta: ArrayLike, h: ArrayLike, x: Array, ranks: Array, sites: Array, prefix_lengths: Array
) -> Array:
    r"""Block form of :func:`curie_weiss_log_marginals` in one pass: ``[L, 2]``.

    Row :math:`j` depends on its prefix only through the prefix length and the pinned spin sum
    :math:`M_j` (a cumulative sum along the order); each row is then the :math:`O(n)` logsumexp
    of :func:`curie_weiss_log_marginals`: :math:`O(n + Ln)` time, in chunks of about
    :math:`2^{20}/n` rows."""
    x = jnp.asarray(x)
    n = x.shape[0]
    ranks, prefix_lengths = block_indices(ranks, prefix_lengths, n)
    num_rows = prefix_lengths.shape[0]
    spins = (2 * x.astype(jnp.int32) - 1).astype(jnp.int32)
    if num_rows <= _MASKED_ROWS:
        pinned = ranks[None, :] < prefix_lengths[:, None]
        pinned_sums = jnp.sum(jnp.where(pinned, spins[None, :], 0), axis=1)
    else:
        spins_in_order = jnp.zeros(n, jnp.int32).at[ranks].set(spins)
        prefix_sums = jnp.concatenate([jnp.zeros(1, jnp.int32), prefix_sum(spins_in_order)])
        pinned_sums = prefix_sums[prefix_lengths]
    log_factorials = jnp.asarray(_log_factorials(n))
    ups = jnp.arange(n, dtype=jnp.int32)[None, :]

    def rows_of(lengths_and_sums: tuple[Array, Array]) -> Array:
        lengths, pinned_sum = lengths_and_sums
        others = jnp.maximum(n - 1 - lengths, 0)
        valid = ups <= others[:, None]
        log_binomial = (
            -log_factorials[ups] - log_factorials[jnp.where(valid, others[:, None] - ups, 0)]
        )
        rest_sum = (pinned_sum[:, None] + 2 * ups - others[:, None]).astype(jnp.float32)
        common = log_binomial + beta / (2 * n) * rest_sum**2 + h * rest_sum
        common = jnp.where(valid, common, -jnp.inf)
        common = common - jnp.max(common, axis=1, keepdims=True)
        tilt = beta / n * rest_sum + h
        return jnp.stack(
            [jax.nn.logsumexp(common - tilt, axis=1), jax.nn.logsumexp(common + tilt, axis=1)],
            axis=1,
        )

    chunk = max(1, min(num_rows, _CHUNK_ELEMENTS // n))
    if chunk >= num_rows:
        rows = rows_of((prefix_lengths, pinned_sums))
    else:
        padding = (-num_rows) % chunk
        chunks = tuple(
            jnp.pad(values, (0, padding)).reshape(-1, chunk)
            for values in (prefix_lengths, pinned_sums)
        )
        rows = jax.lax.map(rows_of, chunks).reshape(-1, 2)[:num_rows]
    del sites  # every free site has the same conditional
    return rows - jax.nn.logsumexp(rows, axis=1, keepdims=True)


# through ``jit``: an eager call compiles once per shape (inlined inside an outer ``jit``)
_jitted_log_marginals = jax.jit(curie_weiss_log_marginals)
_jitted_log_conditionals = jax.jit(curie_weiss_log_conditionals)


@register_parameters(("beta", "h"), ("num_positions",))
class CurieWeissOracle(AnyOrderOracle):
    r"""The Curie-Weiss model on :math:`\{0, 1\}^n` with exact any-order conditionals.

    Spins :math:`s_i = 2x_i - 1`, magnetization :math:`M = \sum_i s_i`:

    .. math:: \mu(x) \propto \exp\Big(\frac{\beta}{2n} M^2 + h M\Big).

    Given pinned sites :math:`S` with spin sum :math:`M_S`, a free site :math:`i` sees
    :math:`r = n - |S| - 1` other free sites.  Summing over the number :math:`j` of up-spins
    among them, with :math:`T_j = M_S + 2j - r` the spin sum of all sites but :math:`i`,

    .. math:: \mu(s_i = s \mid x_S) \propto \sum_{j=0}^{r} \binom{r}{j}
        \exp\Big(\frac{\beta}{2n} (T_j + s)^2 + h (T_j + s)\Big),

    a logsumexp over :math:`j`: :math:`O(n)` per query, shared by all free sites (pinned sites'
    rows are the same row), one pass per block (:func:`curie_weiss_log_conditionals`).
    Mean-field targets illustrate the pinning lemma of Anari et al., "Parallel Sampling via
    Autospeculation" (arXiv:2511.07869), the source of the :math:`\tilde O(\sqrt n)` rounds.
    :math:`\beta` and :math:`h` are pytree leaves and may be traced, e.g. ``beta =
    numpyro.sample("beta", ...)``; the exact laws (:meth:`magnetization_log_probs`) need them
    concrete.

    :param num_positions: :math:`n \ge 1` (static).
    :param beta: inverse temperature :math:`\beta`, a finite scalar (may be traced).
    :param h: external field :math:`h`, a finite scalar (may be traced).

    >>> import jax.numpy as jnp, numpy as np
    >>> oracle = CurieWeissOracle(8, beta=1.0)
    >>> answer = oracle(jnp.ones(8, jnp.int32), jnp.arange(8) < 6)  # six up spins pinned
    >>> answer.shape, bool(answer[7, 1] > np.log(0.5))
    ((8, 2), True)
    >>> float(np.exp(oracle.magnetization_log_probs()).sum()).__round__(6)
    1.0
    """

    num_categories: int = 2
    scores_blocks = True
    #: a row is an O(n) sum over the free magnetization
    rows_per_call = 16

    def __init__(self, num_positions: int, beta: ArrayLike, h: ArrayLike = 0.0) -> None:
        self.num_positions: int = positive_integer(
            num_positions, "CurieWeissOracle: num_positions", OracleError
        )
        self.beta = real_parameter(beta, "beta", owner="CurieWeissOracle", shape=())
        self.h = real_parameter(h, "h", owner="CurieWeissOracle", shape=())

    def __repr__(self) -> str:
        return (
            f"CurieWeissOracle(num_positions={self.num_positions}, beta={shown(self.beta)}, "
            f"h={shown(self.h)})"
        )

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask`` (the same row for all)."""
        return _jitted_log_marginals(self.beta, self.h, x, mask)

    def log_conditionals(
        self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array
    ) -> Array:
        """``[L, 2]`` block form in one pass (:func:`curie_weiss_log_conditionals`)."""
        return _jitted_log_conditionals(self.beta, self.h, x, ranks, sites, prefix_lengths)

    def magnetization_log_probs(self) -> np.ndarray:
        r"""Exact law of the number of up spins: entry ``k = 0..n`` is :math:`\log P(M = 2k - n)`,
        float64, shape ``[n + 1]``."""
        n = self.num_positions
        return self.magnetization_log_probs_given(np.zeros(n, np.int32), np.zeros(n, bool))

    def magnetization_log_probs_given(self, values: ArrayLike, mask: ArrayLike) -> np.ndarray:
        r"""Exact law of the number of up spins among the :math:`f = n - |S|` free sites given the
        pinned ones: entry ``k = 0..f`` is
        :math:`\log P(\sum_{i \notin S} x_i = k \mid x_S) \propto \log\binom{f}{k}
        + \frac{\beta}{2n}(M_S + 2k - f)^2 + h(2k - f)`, float64, shape ``[f + 1]``.

        :param values: ``[n]`` values in ``{0, 1}``, read where ``mask`` is set.
        :param mask: ``[n]`` bool, the pinned sites.
        """
        n = self.num_positions
        beta = concrete_value(self.beta, "beta", owner="CurieWeissOracle")
        h = concrete_value(self.h, "h", owner="CurieWeissOracle")
        values, mask = check_observed(
            values, mask, n, 2, owner="CurieWeissOracle", error=OracleError
        )
        free = n - int(mask.sum())
        pinned_sum = int(np.sum(2 * values[mask].astype(np.int64) - 1))
        free_sum = 2.0 * np.arange(free + 1) - free
        log_weights = (
            _log_binomials(free) + beta / (2 * n) * (pinned_sum + free_sum) ** 2 + h * free_sum
        )
        return log_weights - np.logaddexp.reduce(log_weights)

    def log_prob(self, x: ArrayLike) -> Array:
        r"""Exact joint log-probability of ``x: [..., n]``,
        :math:`\frac{\beta}{2n} M^2 + hM - \log Z` (float64 on the host unless traced)."""
        x = jnp.asarray(x)
        n = self.num_positions
        if is_traced((self.beta, self.h)):
            ups = jnp.arange(n + 1, dtype=jnp.float32)
            magnetization = 2.0 * ups - n
            log_binomials = gammaln(n + 1.0) - gammaln(ups + 1.0) - gammaln(n - ups + 1.0)
            energy = self.beta / (2 * n) * magnetization**2 + self.h * magnetization
            log_z = jax.nn.logsumexp(log_binomials + energy)
            return (energy - log_z)[jnp.sum(x, axis=-1)]
        law = self.magnetization_log_probs() - _log_binomials(n)
        return jnp.asarray(law.astype(np.float32))[jnp.sum(x, axis=-1)]
