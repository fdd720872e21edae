r"""The posterior covariance of stochastic localization, read from its denoiser.

For the denoiser :math:`f(t, y) = \mathbb{E}[Y \mid tY + W_t = y]` the derivative of a
posterior mean in its observation is the posterior covariance,

.. math::

    \nabla_y f(t, y) = \operatorname{Cov}(Y \mid tY + W_t = y),

which the speculation ``speculation_variance="posterior"`` of
:class:`~numpyro_autospec.processes.DiffusionProcess` follows over a block.  It is read at one
point, as the answer of one query, whole (:func:`whole_covariance`) or as a rank-:math:`r`
estimate (:func:`low_rank_covariance`, the randomized range finder of Halko, Martinsson and
Tropp, SIAM Review 53, 2011, plus Hutchinson's trace estimator).  Asymmetric or inexact
readings change the acceptance, never the law (docs/algorithm.md, section 3).
Reference: Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.errors import DenoiserError, positive_integer

__all__ = [
    "POSTERIOR",
    "check_posterior_rank",
    "full_precision_matmul",
    "is_posterior",
    "low_rank_covariance",
    "probes",
    "whole_covariance",
]

POSTERIOR = "posterior"
"""``speculation_variance=POSTERIOR``: the response of the denoiser's Jacobian."""


def is_posterior(variance) -> bool:
    """Whether ``variance`` is the string :data:`POSTERIOR`.

    >>> is_posterior("posterior"), is_posterior(0.01), is_posterior(None)
    (True, False, False)
    """
    return isinstance(variance, str) and variance == POSTERIOR


def check_posterior_rank(rank, variance, dim: int, site: str | None = None) -> int | None:
    """``posterior_rank`` checked: ``None`` for the whole Jacobian (``None`` or ``>= dim``),
    else an ``int``; :class:`~numpyro_autospec.errors.DenoiserError` without ``"posterior"``.

    >>> check_posterior_rank(8, "posterior", 64), check_posterior_rank(64, "posterior", 64)
    (8, None)
    >>> check_posterior_rank(8, 0.01, 64, site="y")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.DenoiserError: site 'y': posterior_rank=8 needs \
speculation_variance='posterior', got 0.01
    """
    if rank is None:
        return None
    prefix = "" if site is None else f"site {site!r}: "
    if not is_posterior(variance):
        raise DenoiserError(
            f"{prefix}posterior_rank={rank!r} needs speculation_variance={POSTERIOR!r}, "
            f"got {variance!r}"
        )
    rank = positive_integer(rank, f"{prefix}posterior_rank", DenoiserError)
    return None if rank >= dim else rank


def full_precision_matmul(a: Array, b: Array) -> Array:
    """A float32 product at full precision, so that a speculation's path and density agree to
    float32 rounding on every backend.

    >>> full_precision_matmul(jnp.eye(2), jnp.ones((2, 1))).tolist()
    [[1.0], [1.0]]
    """
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def probes(dim: int, rank: int) -> Array:
    """The fixed Gaussian probes of :func:`low_rank_covariance`, ``float32[2, dim, rank]``
    (``default_rng(0)``: a query is a function of :math:`(t, y)` alone).

    >>> probes(64, 8).shape
    (2, 64, 8)
    """
    return jnp.asarray(np.random.default_rng(0).standard_normal((2, dim, rank)), jnp.float32)


def whole_covariance(denoiser: Callable[[Array, Array], Array], t: Array, y: Array) -> Array:
    r""":math:`(f, \lambda, U)`, ``[d + d + d * d]``: the drift and the eigendecomposition of
    the symmetric part of :math:`\nabla_y f(t, y)` (``jax.jacfwd``).

    >>> from numpyro_autospec.denoisers import GaussianMixtureDenoiser
    >>> gaussian = GaussianMixtureDenoiser.isotropic(jnp.ones(1), jnp.zeros((1, 2)), 0.5)
    >>> answer = whole_covariance(gaussian, jnp.float32(0.0), jnp.zeros(2))
    >>> [round(float(v), 4) for v in answer[2:4]]  # Cov(Y) = 0.5^2 I at t = 0
    [0.25, 0.25]
    """

    def drift_twice(y):
        drift = denoiser(t, y)
        return drift, drift

    jacobian, drift = jax.jacfwd(drift_twice, has_aux=True)(y)
    variances, basis = jnp.linalg.eigh(0.5 * (jacobian + jacobian.T))
    return jnp.concatenate([drift, variances, basis.reshape(-1)])


def low_rank_covariance(
    denoiser: Callable[[Array, Array], Array], t: Array, y: Array, probes: Array
) -> Array:
    r""":math:`(f, \lambda, \sigma^2, U)`, ``[d + r + 1 + d * r]``, with :math:`J = \nabla_y
    f(t, y)`: :math:`Q` an orthonormal frame of :math:`J \Omega` (:math:`\Omega` the first
    :func:`probes`), :math:`U = Q V` with :math:`V \operatorname{diag}(\lambda) V^\top` the
    symmetric part of :math:`Q^\top J Q`, and :math:`\sigma^2 = \max(0, \tfrac{1}{r} \sum_i
    w_i^\top P J P w_i) / (d - r)`, :math:`P = I - Q Q^\top` (Hutchinson, second probes).
    Exact for a covariance of rank at most :math:`r`; :math:`3r` forward-mode passes.

    >>> from numpyro_autospec.denoisers import GaussianMixtureDenoiser
    >>> gaussian = GaussianMixtureDenoiser.isotropic(jnp.ones(1), jnp.zeros((1, 4)), 0.5)
    >>> answer = low_rank_covariance(gaussian, jnp.float32(0.0), jnp.zeros(4), probes(4, 2))
    >>> answer.shape, [round(float(v), 4) for v in answer[4:6]]  # Cov = 0.25 I: lambda exact
    ((15,), [0.25, 0.25])
    >>> round(float(answer[6]), 2)  # sigma^2: Hutchinson's estimate of the rest's 0.25
    0.3
    """
    dim, rank = probes.shape[1:]
    drift, tangent = jax.linearize(lambda y: denoiser(t, y), y)
    columns = jax.vmap(tangent, in_axes=1, out_axes=1)
    frame, _ = jnp.linalg.qr(columns(probes[0]))  # [d, r], orthonormal
    core = full_precision_matmul(frame.T, columns(frame))
    variances, vectors = jnp.linalg.eigh(0.5 * (core + core.T))
    basis = full_precision_matmul(frame, vectors)
    projected = probes[1] - full_precision_matmul(frame, full_precision_matmul(frame.T, probes[1]))
    rest_trace = jnp.mean(jnp.sum(projected * columns(projected), axis=0))
    rest = jnp.maximum(rest_trace, 0.0) / (dim - rank)
    return jnp.concatenate([drift, variances, rest[None], basis.reshape(-1)])
