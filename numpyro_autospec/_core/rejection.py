"""The arithmetic of recursive speculative rejection sampling, shared by the reference sampler
and the engine so that both consume randomness identically (docs/algorithm.md, section 3).

For a block :math:`S` with target :math:`\\mu_S` and speculation :math:`\\nu_S`:

* the speculation :math:`x' \\sim \\nu_S` is accepted with probability
  :math:`\\min(1, \\mu_S(x')/\\nu_S(x'))`, so it is output with density
  :math:`\\min(\\mu_S, \\nu_S)`;
* a residual trial :math:`y \\sim \\mu_S` (drawn recursively) is accepted with probability
  :math:`\\max(0, 1 - \\nu_S(y)/\\mu_S(y))`, so accepted trials have density proportional to
  :math:`(\\mu_S - \\nu_S)_+`; the first accepted trial of the i.i.d. sequence is output.

The two add up to :math:`\\mu_S` (Anari et al., arXiv:2511.07869, section 3).  Batch ``r``
runs ``batch_size(r)`` trials; trial ``g`` (a global index) has the key
``fold_in(residual_key, g)``, so the output depends only on the root key.
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
    """``(speculate, accept, residual)`` keys of one speculated block."""
    k_spec, k_accept, k_residual = jax.random.split(key, 3)
    return k_spec, k_accept, k_residual


def trial_keys(residual_key: Array, trial: Array) -> tuple[Array, Array, Array]:
    """``(left half, right half, accept)`` keys of residual trial ``trial`` (a global index,
    so batched trials get the keys they get one at a time).

    >>> import jax, jax.numpy as jnp
    >>> residual_key = jax.random.PRNGKey(1)
    >>> left, right, accept = jax.vmap(lambda g: trial_keys(residual_key, g))(jnp.arange(4))
    >>> bool((accept[3] == trial_keys(residual_key, 3)[2]).all())
    True
    """
    k_left, k_right, k_accept = jax.random.split(jax.random.fold_in(residual_key, trial), 3)
    return k_left, k_right, k_accept


def speculation_log_accept_prob(log_mu: Array, log_nu: Array) -> Array:
    """:math:`\\log \\min(1, \\mu/\\nu)` for a speculation :math:`x' \\sim \\nu`."""
    return jnp.minimum(log_mu - log_nu, 0.0)


def residual_log_accept_prob(log_mu: Array, log_nu: Array) -> Array:
    """:math:`\\log \\max(0, 1 - \\nu/\\mu)` for a residual trial :math:`y \\sim \\mu`,
    computed with ``-expm1``."""
    difference = log_nu - log_mu
    safe = jnp.where(difference < 0, difference, -1.0)
    return jnp.where(difference < 0, jnp.log(-jnp.expm1(safe)), -jnp.inf)


def speculation_accepts(key: Array, log_mu: Array, log_nu: Array) -> Array:
    """Accept :math:`x' \\sim \\nu` with probability :math:`\\min(1, e^{\\log\\mu - \\log\\nu})`.

    >>> import jax, jax.numpy as jnp
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 10_000)
    >>> accepts = jax.vmap(lambda key: speculation_accepts(key, jnp.log(0.2), jnp.log(0.4)))(keys)
    >>> round(float(accepts.mean()), 1)
    0.5
    """
    return jnp.log(jax.random.uniform(key)) < speculation_log_accept_prob(log_mu, log_nu)


def residual_accepts(key: Array, log_mu: Array, log_nu: Array) -> Array:
    """Accept a residual trial :math:`y \\sim \\mu` with probability
    :math:`\\max(0, 1 - e^{\\log\\nu - \\log\\mu})` (:func:`residual_log_accept_prob`)."""
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
    r"""One draw from each row of ``log_rows`` (``float[R, q]``, unnormalized), by inversion:
    with :math:`p_{ic} \propto e^{\ell_{ic}}`, :math:`F_{ic} = \sum_{c' \le c} p_{ic'}` and
    :math:`u_i \sim U[0, 1)`, the first :math:`c` with :math:`p_{ic} > 0` and
    :math:`F_{ic} > u_i F_{i,q-1}` (else the last possible one).  One uniform per row, where
    ``jax.random.categorical`` takes :math:`q` Gumbel variables; a category of probability zero
    is never drawn.

    >>> import jax, jax.numpy as jnp
    >>> rows = jnp.log(jnp.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    >>> categorical_rows(jax.random.key(0), rows).tolist()
    [1, 2]
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
