r"""An inconsistent oracle for tests: a table's conditionals perturbed per mask pattern."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import (
    concrete_value,
    is_traced,
    real_parameter,
    register_parameters,
    shown,
)
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles._base import AnyOrderOracle
from numpyro_autospec.oracles._table import TableOracle, table_log_marginals
from numpyro_autospec.oracles._validation import check_order_and_observed

__all__ = ["PerturbedOracle", "perturbed_log_marginals"]

_MAX_POSITIONS = 16


def _logsumexp(values: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """float64 logsumexp with ``keepdims=True``; all ``-inf`` gives ``-inf``."""
    if isinstance(axis, tuple) and not axis:
        return values
    peak = np.max(values, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(values - peak), axis=axis, keepdims=True)) + peak


def perturbed_log_marginals(log_probs: Array, noise: Array, x: Array, mask: Array) -> Array:
    """Functional core of :class:`PerturbedOracle`: the conditionals of the normalized log-table
    ``log_probs`` (shape ``(q,)*n``) plus ``noise[c(S)]`` (``noise: [2^n, n, q]``), renormalized."""
    mask = jnp.asarray(mask, bool)
    powers = 2 ** jnp.arange(mask.shape[0], dtype=jnp.int32)
    pattern = jnp.sum(jnp.where(mask, powers, 0))
    logits = table_log_marginals(log_probs, x, mask) + jnp.asarray(noise)[pattern]
    return logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)


# through ``jit``: an eager call compiles once per shape (inlined inside an outer ``jit``)
_jitted_log_marginals = jax.jit(perturbed_log_marginals)


@register_parameters(("table", "scale", "noise"), ("num_positions", "num_categories"))
class PerturbedOracle(AnyOrderOracle):
    r"""A table's conditionals perturbed by fixed noise per mask pattern: no joint behind them.

    With :math:`\mu` the table's joint, :math:`S` the pinned sites and
    :math:`c(S) = \sum_{i \in S} 2^i` the index of the mask pattern,

    .. math:: p(X_i = v \mid x_S) = \frac{\mu(X_i = v \mid x_S)\, e^{g_{c(S), i, v}}}
        {\sum_{w} \mu(X_i = w \mid x_S)\, e^{g_{c(S), i, w}}},
        \qquad g \sim \text{scale} \cdot \mathcal N(0, 1)^{2^n \times n \times q}

    drawn once from ``key``.  Conditionals of different masks come from no single joint, as
    with a learned network.  For a fixed order :math:`\sigma` the autospeculative sampler's law
    is that of sequential sampling, :math:`\prod_k p(x_{\sigma(k)} \mid x_{\sigma(<k)})`
    (Anari et al., arXiv:2511.07869), given exactly by :meth:`sequential_log_probs`.  A pytree:
    the parameters may be traced, but :meth:`sequential_log_probs` needs them concrete.

    :param table: the consistent oracle to perturb (:math:`n \le 16`).
    :param scale: standard deviation of the log-perturbation :math:`g` (0 gives the table).
    :param key: PRNG key of the noise table.

    >>> import jax, numpy as np
    >>> table = TableOracle(np.log(np.full((2, 2, 2), 1 / 8)))
    >>> oracle = PerturbedOracle(table, 0.5, jax.random.PRNGKey(0))
    >>> left = oracle.sequential_log_probs([0, 1, 2])
    >>> right = oracle.sequential_log_probs([2, 1, 0])
    >>> float(np.exp(left).sum()).__round__(6), bool(np.allclose(left, right))
    (1.0, False)
    """

    def __init__(self, table: TableOracle, scale: ArrayLike, key: Array) -> None:
        if not isinstance(table, TableOracle):
            raise OracleError(
                f"PerturbedOracle: table must be a TableOracle, got {type(table).__name__}"
            )
        if table.num_positions > _MAX_POSITIONS:
            raise OracleError(
                f"PerturbedOracle: the noise table has 2^n rows, so n must be at most "
                f"{_MAX_POSITIONS}, got {table.num_positions}"
            )
        self.table: TableOracle = table
        self.scale = real_parameter(scale, "scale", owner="PerturbedOracle", shape=(), minimum=0)
        self.num_positions: int = table.num_positions
        self.num_categories: int = table.num_categories
        n, q = self.num_positions, self.num_categories
        noise = self.scale * jax.random.normal(key, (2**n, n, q), jnp.float32)
        self.noise = noise if is_traced(noise) else np.asarray(noise, np.float32)

    def __repr__(self) -> str:
        scale = shown(self.scale)
        return f"PerturbedOracle({self.table!r}, scale={scale})"

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """Perturbed log conditional marginals ``[n, q]`` given ``x`` on ``mask``."""
        return _jitted_log_marginals(self.table._table, self.noise, x, mask)

    def sequential_log_probs(
        self, order: ArrayLike, values: ArrayLike | None = None, mask: ArrayLike | None = None
    ) -> np.ndarray:
        r"""Exact law of sequential any-order sampling with the fixed ``order``, observed sites
        (``mask``) first, fixed to ``values``.  Entry :math:`y` is
        :math:`\sum_k \log p(y_{\sigma(k)} \mid y_{\sigma(<k)})` over the free steps :math:`k`,
        ``-inf`` where :math:`y` differs from ``values`` on ``mask`` (float64, :math:`O(n q^n)`).

        :param order: a permutation of ``range(n)``.
        :param values: ``[n]`` observed values, read where ``mask`` is set.
        :param mask: ``[n]`` bool, the observed sites (default: none).
        :return: normalized log-probabilities, float64 numpy of shape ``(q,)*n``.
        """
        n, q = self.num_positions, self.num_categories
        order, values, mask = check_order_and_observed(order, values, mask, n, q)
        joint = concrete_value(self.table.log_probs, "table", owner="PerturbedOracle")
        noise_table = concrete_value(self.noise, "noise", owner="PerturbedOracle")
        powers = 2 ** np.arange(n, dtype=np.int64)
        total = np.zeros(joint.shape)
        pinned = mask.copy()
        for site in order[~mask[order]]:
            keep = pinned.copy()
            keep[site] = True
            marginal = _logsumexp(joint, tuple(np.flatnonzero(~keep)))
            normalizer = _logsumexp(marginal, site)
            with np.errstate(invalid="ignore"):
                conditional = np.where(np.isfinite(normalizer), marginal - normalizer, -np.log(q))
            shape = [1] * n
            shape[site] = q
            noise = noise_table[int(powers[pinned].sum()), site]
            logits = conditional + noise.reshape(shape)
            total = total + (logits - _logsumexp(logits, site))
            pinned[site] = True
        configurations = self.table.configurations()
        observed = np.all((configurations == values[None, :]) | ~mask[None, :], axis=1)
        return np.where(observed.reshape(joint.shape), total, -np.inf)
