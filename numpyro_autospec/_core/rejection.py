"""The arithmetic of recursive speculative rejection sampling, shared by the reference sampler
and the engine so that both consume randomness identically (docs/algorithm.md, section 3).

For a block :math:`S` with target :math:`\\mu_S` and speculation :math:`\\nu_S`:

* the speculation :math:`x' \\sim \\nu_S` is accepted with probability
  :math:`\\min(1, \\mu_S(x')/\\nu_S(x'))`, so it is output with density
  :math:`\\min(\\mu_S, \\nu_S)`;
* a residual trial :math:`y \\sim \\mu_S` (drawn recursively) is accepted with probability
  :math:`\\max(0, 1 - \\nu_S(y)/\\mu_S(y))`, so accepted trials have density proportional to
  :math:`(\\mu_S - \\nu_S)_+`; the first accepted trial of the i.i.d. sequence is output.

The two add up to :math:`\\mu_S` (Anari et al., arXiv:2511.07869, section 3).  Trials are
indexed globally ``g = 0, 1, 2, ...`` and batch ``r`` runs ``batch_size(r)`` of them in
parallel; the key of trial ``g`` is ``fold_in(residual_key, g)``, so the output does not depend
on batch sizes, capacities or scheduling at all, only on the root key.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import Array

__all__ = [
    "block_keys",
    "trial_keys",
    "speculation_accepts",
    "residual_accepts",
    "speculation_log_accept_prob",
    "residual_log_accept_prob",
    "batch_size",
    "categorical_rows",
]


def block_keys(key: Array) -> tuple[Array, Array, Array]:
    """``(speculate, accept, residual)`` keys of one speculated block: three independent
    streams split from the block's key.

    >>> import jax
    >>> speculate, accept, residual = block_keys(jax.random.PRNGKey(0))
    >>> len({tuple(key.tolist()) for key in (speculate, accept, residual)})
    3
    """
    k_spec, k_accept, k_residual = jax.random.split(key, 3)
    return k_spec, k_accept, k_residual


def trial_keys(residual_key: Array, trial: Array) -> tuple[Array, Array, Array]:
    """``(left half, right half, accept)`` keys of residual trial number ``trial``.

    The keys depend only on the global trial index, so a batch of trials (``vmap`` over the
    indices) gets the keys that the same trials get one at a time:

    >>> import jax, jax.numpy as jnp
    >>> residual_key = jax.random.PRNGKey(1)
    >>> left, right, accept = jax.vmap(lambda g: trial_keys(residual_key, g))(jnp.arange(4))
    >>> bool((accept[3] == trial_keys(residual_key, 3)[2]).all())
    True
    """
    k_left, k_right, k_accept = jax.random.split(jax.random.fold_in(residual_key, trial), 3)
    return k_left, k_right, k_accept


def speculation_log_accept_prob(log_mu: Array, log_nu: Array) -> Array:
    """:math:`\\log \\min(1, \\mu/\\nu)` for a speculation :math:`x' \\sim \\nu`.

    >>> import jax.numpy as jnp
    >>> log_mu, log_nu = jnp.log(jnp.array([0.2, 0.6])), jnp.log(jnp.array([0.4, 0.3]))
    >>> jnp.exp(speculation_log_accept_prob(log_mu, log_nu)).round(3).tolist()
    [0.5, 1.0]
    """
    return jnp.minimum(log_mu - log_nu, 0.0)


def residual_log_accept_prob(log_mu: Array, log_nu: Array) -> Array:
    """:math:`\\log \\max(0, 1 - \\nu/\\mu)` for a residual trial :math:`y \\sim \\mu`,
    with :math:`1 - e^d` computed as ``-expm1(d)``.

    >>> import jax.numpy as jnp
    >>> log_mu, log_nu = jnp.log(jnp.array([0.2, 0.6])), jnp.log(jnp.array([0.4, 0.3]))
    >>> jnp.exp(residual_log_accept_prob(log_mu, log_nu)).round(3).tolist()
    [0.0, 0.5]
    """
    difference = log_nu - log_mu
    safe = jnp.where(difference < 0, difference, -1.0)
    return jnp.where(difference < 0, jnp.log(-jnp.expm1(safe)), -jnp.inf)


def speculation_accepts(key: Array, log_mu: Array, log_nu: Array) -> Array:
    """Accept :math:`x' \\sim \\nu` with probability :math:`\\min(1, e^{\\log\\mu - \\log\\nu})`.

    The frequency of acceptance over many keys, for :math:`\\mu = 0.2`, :math:`\\nu = 0.4`:

    >>> import jax, jax.numpy as jnp
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 10_000)
    >>> accepts = jax.vmap(lambda key: speculation_accepts(key, jnp.log(0.2), jnp.log(0.4)))(keys)
    >>> round(float(accepts.mean()), 1)
    0.5
    """
    return jnp.log(jax.random.uniform(key)) < speculation_log_accept_prob(log_mu, log_nu)


def residual_accepts(key: Array, log_mu: Array, log_nu: Array) -> Array:
    """Accept a residual trial :math:`y \\sim \\mu` with probability
    :math:`\\max(0, 1 - e^{\\log\\nu - \\log\\mu})`.

    Never where :math:`\\nu \\ge \\mu`: the frequencies of acceptance over many keys, for
    :math:`(\\mu, \\nu) = (0.2, 0.4)` and :math:`(0.6, 0.3)` (as in
    :func:`residual_log_accept_prob`):

    >>> import jax, jax.numpy as jnp
    >>> log_mu, log_nu = jnp.log(jnp.array([0.2, 0.6])), jnp.log(jnp.array([0.4, 0.3]))
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 10_000)
    >>> accepts = jax.vmap(lambda key: residual_accepts(key, log_mu, log_nu))(keys)
    >>> accepts.mean(axis=0).round(1).tolist()
    [0.0, 0.5]
    """
    return jnp.log(jax.random.uniform(key)) < residual_log_accept_prob(log_mu, log_nu)


def batch_size(batch: int, growth: float) -> int:
    """Number of parallel trials in residual batch ``batch``:
    :math:`\\lceil (1+\\rho)^r \\rceil`.

    >>> [batch_size(batch, growth=1.0) for batch in range(5)]
    [1, 2, 4, 8, 16]
    >>> [batch_size(batch, growth=0.5) for batch in range(5)]
    [1, 2, 3, 4, 6]
    """
    return max(1, math.ceil((1.0 + growth) ** batch - 1e-9))


def categorical_rows(key: Array, log_rows: Array) -> Array:
    r"""One independent draw from each row of ``log_rows`` (``float[R, q]``, log-probabilities
    up to a constant per row), by inversion: with :math:`p_{ic} \propto e^{\ell_{ic}}`,
    :math:`F_{ic} = \sum_{c' \le c} p_{ic'}` and :math:`u_i \sim U[0, 1)`, row :math:`i`
    draws the first category :math:`c` with :math:`p_{ic} > 0` and
    :math:`F_{ic} > u_i F_{i,q-1}`, the one whose interval :math:`[F_{i,c-1}, F_{ic})` holds
    :math:`u_i F_{i,q-1}`.

    A speculation draws all the rows of its answer at once (:math:`R` up to :math:`n`, for
    windows): inversion takes one uniform per row where ``jax.random.categorical`` takes
    :math:`q` Gumbel variables (a hash and two logarithms each), which on a CPU made the draw
    the costliest kernel of a round at :math:`n = 1024,\ q = 98`.  A category of probability
    zero is never drawn, even where rounding makes the prefix sums (a parallel scan,
    :math:`\log_2 q` passes) decrease by an ulp; a product :math:`u_i F_{i,q-1}` rounded up to
    :math:`F_{i,q-1}` falls back to the last category of positive probability.

    >>> import jax, jax.numpy as jnp
    >>> rows = jnp.log(jnp.array([[0.2, 0.8, 0.0], [0.0, 0.0, 1.0]]))
    >>> keys = jax.random.split(jax.random.key(0), 4000)
    >>> draws = jax.vmap(lambda key: categorical_rows(key, rows))(keys)
    >>> draws.shape, bool((draws[:, 1] == 2).all()), bool((draws[:, 0] != 2).all())
    ((4000, 2), True, True)
    >>> abs(float((draws[:, 0] == 1).mean()) - 0.8) < 0.03
    True
    """
    weights = jnp.exp(log_rows - jnp.max(log_rows, axis=-1, keepdims=True))
    # log2(q) elementwise passes; XLA's cumsum is a window sum of q^2 / 2 additions on a CPU
    cumulative = jax.lax.associative_scan(jnp.add, weights, axis=-1)
    uniform = jax.random.uniform(key, log_rows.shape[:-1]) * cumulative[..., -1]
    possible = weights > 0
    chosen = (cumulative > uniform[..., None]) & possible
    last_possible = log_rows.shape[-1] - 1 - jnp.argmax(possible[..., ::-1], axis=-1)
    index = jnp.where(jnp.any(chosen, axis=-1), jnp.argmax(chosen, axis=-1), last_possible)
    return index.astype(jnp.int32)
