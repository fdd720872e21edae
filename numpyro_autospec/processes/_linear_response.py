r"""The linear-response speculation of stochastic localization (docs/diffusion.md).

:class:`~numpyro_autospec.processes.DiffusionProcess` speculates a block
:math:`S = [a, a + m)` of its Euler-Maruyama chain from the single query
:math:`O_a = f(t_a, y_a)`.  The paper freezes the drift at :math:`O_a`; the *linear response*
lets it follow the deviation of the path from the frozen-drift mean,

.. math::

    b_k = O_a + C_k z_k, \qquad z_k = y_k - y_a - (t_k - t_a) O_a, \qquad k \in S,

with a response :math:`C_k` standing for the posterior covariance
:math:`\operatorname{Cov}(Y \mid y_{t_k})`:

* a given variance :math:`s^2`: :math:`C_k = c_k I`, :math:`c_k = s^2 / (1 + s^2 t_k)`;
* the posterior's, read at the block's start
  (:mod:`~numpyro_autospec.processes._posterior_covariance`):
  :math:`C_k = U \operatorname{diag}(\lambda / (1 + \lambda (t_k - t_a))) U^\top`, plus the
  isotropic rest's response off :math:`U` for a rank-:math:`r` estimate.

Along each direction :math:`z_{k+1} = (1 + h_k c_k) z_k + \sqrt{h_k}\,\xi_k`, :math:`z_a = 0`,
drawn in one cumulative sum (:func:`response_walk`).  Any response keeps the law exact
(docs/algorithm.md section 3).  The functions work on a window ``steps`` of ``L`` steps holding
the block.  Reference: Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core.prefix_sums import prefix_sum
from numpyro_autospec.errors import DenoiserError
from numpyro_autospec.processes._posterior_covariance import POSTERIOR
from numpyro_autospec.processes._posterior_covariance import (
    full_precision_matmul as _matmul,
)

__all__ = [
    "Response",
    "check_speculation_variance",
    "given_variance_response",
    "given_variance_tables",
    "posterior_response",
    "response_drift",
    "response_walk",
    "sample_deviation",
]


class Response(NamedTuple):
    """The linear response of a block on a window of ``L`` steps: ``basis`` ``None`` (the
    identity) or :math:`U`, ``[d, r]``; ``rates[j, i]`` :math:`c_k` and ``log_growths[j, i]``
    :math:`G_k` along direction ``i`` at :math:`k` = ``steps[j]``, ``[L, 1]``, ``[L, r]`` or
    ``[L, r + 1]`` (the last column the rest's)."""

    basis: Array | None
    rates: Array
    log_growths: Array


def given_variance_tables(variance: Array, times: Array, step_sizes: Array) -> tuple[Array, Array]:
    """``(c, L)`` of a given variance :math:`s^2` on the whole grid: :math:`c_k = s^2 / (1 +
    s^2 t_k)`, ``k < N``, and :math:`L_k = \\sum_{i<k} \\log(1 + h_i c_i)`, ``k <= N``."""
    rates = variance / (1.0 + variance * times[:-1])
    log_growths = jnp.concatenate([jnp.zeros(1), jnp.cumsum(jnp.log1p(step_sizes * rates))])
    return rates, log_growths


def given_variance_response(rates: Array, log_growths: Array, a: Array, steps: Array) -> Response:
    """The :class:`Response` of a block starting at ``a`` from the tables of
    :func:`given_variance_tables`: :math:`G_k = L_{k+1} - L_a`."""
    growths = log_growths[steps + 1] - log_growths[a]
    return Response(None, rates[steps][:, None], growths[:, None])


def posterior_response(
    answer: Array,
    dim: int,
    columns: int,
    with_rest: bool,
    times: Array,
    step_sizes: Array,
    a: Array,
    steps: Array,
) -> Response:
    r"""The :class:`Response` of an answer :math:`(f, \lambda, U)` (or, ``with_rest``,
    :math:`(f, \lambda, \sigma^2, U)`): :math:`c_k = \lambda_i / (1 + \lambda_i (t_k - t_a))`,
    eigenvalues clipped at 0."""
    count = columns + with_rest  # variances: one more with a rank, the rest's
    variances = jnp.maximum(answer[dim : dim + count], 0.0)[None, :]
    basis = answer[dim + count :].reshape(dim, columns)
    elapsed = (times[steps] - times[a])[:, None]
    rates = variances / (1.0 + variances * elapsed)
    after = (steps >= a)[:, None]
    growths = jnp.where(after, jnp.log1p(step_sizes[steps][:, None] * rates), 0.0)
    return Response(basis, rates, prefix_sum(growths, axis=0))


def response_walk(log_growths: Array, scaled_noise: Array, in_block: Array) -> Array:
    r"""The deviations :math:`z_{k+1} = e^{G_k} \sum_{j=a}^{k} e^{-G_j} \sqrt{h_j}\,\xi_j`,
    :math:`G_k = \sum_{a \le l \le k} \log(1 + h_l c_l)` (``scaled_noise``
    :math:`= \sqrt{h_j}\,\xi_j`; rows outside ``in_block`` add nothing)."""
    scaled = jnp.exp(-log_growths) * scaled_noise
    return jnp.exp(log_growths) * prefix_sum(jnp.where(in_block, scaled, 0.0), axis=0)


def sample_deviation(
    response: Response,
    noise: Array,
    sqrt_step_sizes: Array,
    in_block: Array,
    with_rest: bool,
) -> Array:
    r"""The deviations :math:`z_{k+1}`, ``[L, d]``, from standard normal ``noise``, walked in
    the response's basis (``with_rest``: the noise off :math:`U` with the rest's response)."""
    log_growths = response.log_growths
    if response.basis is None:
        return response_walk(log_growths, sqrt_step_sizes * noise, in_block)
    coordinates = _matmul(noise, response.basis)
    if with_rest:
        log_growths, rest_growths = log_growths[:, :-1], log_growths[:, -1:]
    deviation = response_walk(log_growths, sqrt_step_sizes * coordinates, in_block)
    deviation = _matmul(deviation, response.basis.T)
    if with_rest:
        rest = noise - _matmul(coordinates, response.basis.T)
        deviation = deviation + response_walk(rest_growths, sqrt_step_sizes * rest, in_block)
    return deviation


def response_drift(drift: Array, response: Response, deviation: Array, with_rest: bool) -> Array:
    r"""The drift :math:`b_k = O_a + C_k z_k` from ``drift`` :math:`O_a` (``[1, d]``) and
    ``deviation`` :math:`z_k` (``[L, d]``)."""
    basis, rates = response.basis, response.rates
    if basis is None:
        return drift + rates * deviation
    coordinates = _matmul(deviation, basis)
    if not with_rest:
        return drift + _matmul(coordinates * rates, basis.T)
    rest = deviation - _matmul(coordinates, basis.T)
    return drift + _matmul(coordinates * rates[:, :-1], basis.T) + rates[:, -1:] * rest


def check_speculation_variance(variance, site: str | None = None) -> Array:
    """The variance as float32; a concrete value that is not a positive finite scalar raises
    :class:`~numpyro_autospec.errors.DenoiserError` (a traced one: only its shape is checked).

    >>> float(check_speculation_variance(0.25))
    0.25
    >>> check_speculation_variance(-1.0, site="y")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.DenoiserError: site 'y': speculation_variance must be a positive finite scalar, got -1.0
    """  # noqa: E501
    prefix = "" if site is None else f"site {site!r}: "
    if isinstance(variance, str):
        raise DenoiserError(
            f"{prefix}speculation_variance must be a positive finite scalar or "
            f"{POSTERIOR!r}, got {variance!r}"
        )
    shape = variance.shape if isinstance(variance, jax.core.Tracer) else np.shape(variance)
    if shape != ():
        raise DenoiserError(f"{prefix}speculation_variance must be a scalar, got shape {shape}")
    if not isinstance(variance, jax.core.Tracer):
        value = np.asarray(variance, dtype=np.float64)
        if not (np.isfinite(value) and value > 0):
            raise DenoiserError(
                f"{prefix}speculation_variance must be a positive finite scalar, got {variance!r}"
            )
    return jnp.asarray(variance, dtype=jnp.float32)
