r"""An explicit joint table over :math:`[q]^n`: the exact target of small tests."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import concrete_value, is_traced, register_parameters
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles._base import AnyOrderOracle
from numpyro_autospec.oracles._validation import check_observed

__all__ = ["TableOracle", "table_log_marginals"]

_MAX_CELLS = 2**22


def table_log_marginals(log_probs: Array, x: Array, mask: Array) -> Array:
    r"""Functional core of :class:`TableOracle`: conditionals ``[n, q]`` of a normalized
    log-table of shape ``(q,)*n`` given ``x`` on ``mask`` (uniform rows if :math:`\mu(x_S) = 0`).

    Each site's marginal reduces a rank-3 view ``(q^i, q, q^{n-i-1})`` of the masked table
    (high-rank reductions compile very slowly on XLA:CPU)."""
    log_probs, x, mask = jnp.asarray(log_probs), jnp.asarray(x), jnp.asarray(mask, bool)
    n, q = log_probs.ndim, log_probs.shape[0]
    size = q**n
    strides = q ** np.arange(n - 1, -1, -1)
    configurations = (jnp.arange(size)[:, None] // strides[None, :]) % q  # [q^n, n]
    mismatch = (configurations != x[None, :]) & mask[None, :]
    masked = jnp.where(jnp.any(mismatch, axis=1), -jnp.inf, log_probs.reshape(size))
    marginals = jnp.stack(
        [
            jax.nn.logsumexp(masked.reshape(q**site, q, q ** (n - site - 1)), axis=(0, 2))
            for site in range(n)
        ]
    )
    total = jax.nn.logsumexp(marginals, axis=-1, keepdims=True)
    uniform = jnp.full((n, q), -np.log(q), marginals.dtype)
    return jnp.where(jnp.isfinite(total), marginals - total, uniform)


# through ``jit``: an eager call compiles once per shape (inlined inside an outer ``jit``)
_jitted_log_marginals = jax.jit(table_log_marginals)


@register_parameters(("log_probs", "_table"), ("num_positions", "num_categories"))
class TableOracle(AnyOrderOracle):
    r"""Exact any-order conditionals of an explicit joint :math:`\mu` on :math:`[q]^n`.

    The joint is given as unnormalized log-weights of shape ``(q,)*n`` (``-inf`` marks an
    impossible configuration) and normalized here.  For pinned sites :math:`S`,

    .. math:: \mu(X_i = v \mid X_S = x_S) =
        \frac{\sum_{y:\, y_S = x_S,\, y_i = v} \mu(y)}{\sum_{y:\, y_S = x_S} \mu(y)},

    in log space: :math:`O(n q^n)` per query, practical up to :math:`q^n \approx 10^5`.  When
    :math:`x_S` has probability zero every row is uniform (finite and normalized, never NaN).
    The table is a pytree leaf and may be traced (then normalized in the program, not checked).

    :param log_probs: log-weights of shape ``(q,)*n``, no NaN or ``+inf``, not all ``-inf``;
        the attribute ``log_probs`` holds them normalized (float64 numpy when concrete).

    >>> import numpy as np, jax.numpy as jnp
    >>> oracle = TableOracle(np.log([[0.4, 0.1], [0.2, 0.3]]))
    >>> x, mask = jnp.array([1, 0]), jnp.array([True, False])
    >>> np.exp(np.asarray(oracle(x, mask), float))[1].round(3).tolist()  # mu(X_1 | X_0 = 1)
    [0.4, 0.6]
    >>> float(np.exp(oracle.log_prob(jnp.array([0, 1])))).__round__(3)
    0.1
    """

    def __init__(self, log_probs: ArrayLike) -> None:
        shape = tuple(np.shape(log_probs))
        if len(shape) < 1 or len(set(shape)) != 1 or shape[0] < 1:
            raise OracleError(f"TableOracle: log_probs must have shape (q,)*n, got {shape}")
        size = int(np.prod(shape))
        if size > _MAX_CELLS:
            raise OracleError(
                f"TableOracle: a table of {size} cells is too large to enumerate (max {_MAX_CELLS})"
            )
        self.num_positions: int = len(shape)
        self.num_categories: int = shape[0]
        if is_traced(log_probs):  # normalized in the program; a bad table gives NaN answers
            log_probs = jnp.asarray(log_probs, jnp.float32)
            self.log_probs = log_probs - jax.nn.logsumexp(log_probs)
            self._table = self.log_probs
            return
        log_probs = np.asarray(log_probs, np.float64)
        for defect, text in ((np.isnan, "NaN"), (np.isposinf, "+inf")):
            if np.any(defect(log_probs)):
                index = tuple(int(i) for i in np.argwhere(defect(log_probs))[0])
                raise OracleError(f"TableOracle: log_probs{list(index)} is {text}")
        if np.all(log_probs == -np.inf):
            raise OracleError("TableOracle: log_probs is -inf everywhere (the joint has no mass)")
        self.log_probs = log_probs - np.logaddexp.reduce(log_probs, axis=None)
        self._table = self.log_probs.astype(np.float32)

    def __repr__(self) -> str:
        return (
            f"TableOracle(num_positions={self.num_positions}, num_categories={self.num_categories})"
        )

    def configurations(self) -> np.ndarray:
        """All configurations in row-major (C) order of the table, shape ``[q^n, n]``."""
        q, n = self.num_categories, self.num_positions
        return np.array(list(itertools.product(range(q), repeat=n)), np.int32).reshape(-1, n)

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """Log conditional marginals ``[n, q]`` of every site given ``x`` on ``mask``."""
        return _jitted_log_marginals(self._table, x, mask)

    def log_prob(self, x: ArrayLike) -> Array:
        """Exact joint log-probability of configurations ``x: [..., n]`` (``-inf`` outside
        :math:`[q]^n`)."""
        x = jnp.asarray(x)
        n, q = self.num_positions, self.num_categories
        strides = (q ** np.arange(n - 1, -1, -1)).astype(np.int32)
        inside = jnp.all((x >= 0) & (x < q), axis=-1)
        index = jnp.clip(x, 0, q - 1) @ strides
        return jnp.where(inside, jnp.reshape(jnp.asarray(self._table), -1)[index], -jnp.inf)

    def conditional_log_probs(self, values: ArrayLike, mask: ArrayLike) -> np.ndarray:
        r"""Exact law :math:`\mu(y \mid y_S = x_S)` given the observed entries, a normalized
        float64 table of shape ``(q,)*n`` (``-inf`` where :math:`y_S \ne x_S`).

        :param values: ``[n]`` integer values, read where ``mask`` is set.
        :param mask: ``[n]`` bool, the observed sites.
        :raises OracleError: for wrong shapes, observed values outside :math:`[0, q)`, or an
            observation of probability zero.
        """
        n, q = self.num_positions, self.num_categories
        log_probs = concrete_value(self.log_probs, "log_probs", owner="TableOracle")
        values, mask = check_observed(values, mask, n, q, owner="TableOracle", error=OracleError)
        selector = tuple(int(values[i]) if mask[i] else slice(None) for i in range(n))
        conditional = np.full(log_probs.shape, -np.inf)
        block = log_probs[selector]
        total = np.logaddexp.reduce(np.ravel(block))
        if not np.isfinite(total):
            raise OracleError("TableOracle: the observed values have probability zero")
        conditional[selector] = block - total
        return conditional
