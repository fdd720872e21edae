r"""The law the samplers draw from, enumerated on small spaces: the reference of exactness tests.

Sequential sampling along an order :math:`\sigma` (the observed sites :math:`O` first, in index
order, then the free sites) draws :math:`x` with probability

.. math:: p_\sigma(x) = \prod_{k=|O|}^{n-1} p(x_{\sigma(k)} \mid x_{\sigma(<k)}),

and with a uniformly random order of the free sites, the law of every sampler of the project
(section 2a of docs/algorithm.md; Anari et al., arXiv:2511.07869) is

.. math:: p_{\text{mix}}(x) = \frac{1}{(n-|O|)!} \sum_{\sigma} p_\sigma(x).

Both are enumerated over all :math:`q^n` configurations (zero off the observed values) with the
oracle's block form: one ``log_conditionals`` call per (order, configuration).
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from numpyro_autospec.errors import InputError
from numpyro_autospec.oracles._base import AnyOrderOracle

__all__ = ["fixed_order_law", "random_order_law"]

_MAX_EVALUATIONS = 1 << 22
_CHUNK = 1 << 14


def _pinned(
    n: int, q: int, observed: ArrayLike | None, observed_mask: ArrayLike | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mask, values, configurations)``, the configurations ``int32[q**n, n]`` in C order."""
    if observed_mask is None:
        mask = np.zeros(n, bool)
        values = np.zeros(n, np.int32)
    else:
        mask = np.asarray(observed_mask, bool)
        values = np.asarray(observed, np.int32)
        if mask.shape != (n,) or values.shape != (n,):
            raise InputError(f"observed and observed_mask must have shape ({n},)")
    configurations = np.stack(np.unravel_index(np.arange(q**n), (q,) * n), axis=1)
    return mask, values, configurations.astype(np.int32)


def _full_orders(mask: np.ndarray, free_orders: np.ndarray) -> np.ndarray:
    """Observed sites first in index order, then each order of the free sites."""
    observed_sites = np.flatnonzero(mask)
    head = np.broadcast_to(observed_sites, (len(free_orders), len(observed_sites)))
    return np.concatenate([head, free_orders], axis=1).astype(np.int32)


def _laws(oracle: AnyOrderOracle, orders: np.ndarray, observed, observed_mask) -> np.ndarray:
    """``float64[len(orders), q**n]``: :math:`p_\\sigma` of each full order (free steps only)."""
    n, q = oracle.num_positions, oracle.num_categories
    mask, values, configurations = _pinned(n, q, observed, observed_mask)
    if len(orders) * q**n > _MAX_EVALUATIONS:
        raise InputError(
            f"{len(orders)} orders x {q**n} configurations is too many to enumerate "
            f"(at most {_MAX_EVALUATIONS})"
        )
    num_observed = int(mask.sum())
    steps = jnp.arange(n)

    def log_prob(x, order):
        ranks = jnp.zeros(n, jnp.int32).at[order].set(steps)
        rows = oracle.log_conditionals(x, ranks, order, steps)
        terms = rows[steps, x[order]]
        return jnp.sum(jnp.where(steps >= num_observed, terms, 0.0))

    batched = jax.jit(jax.vmap(log_prob))
    pairs_order = np.repeat(np.arange(len(orders)), len(configurations))
    pairs_config = np.tile(np.arange(len(configurations)), len(orders))
    logs = np.empty(len(pairs_order))
    for start in range(0, len(pairs_order), _CHUNK):
        chunk = slice(start, start + _CHUNK)
        size = len(pairs_order[chunk])
        padded = np.resize(np.arange(size), _CHUNK)  # one compiled shape for every chunk
        xs = configurations[pairs_config[chunk]][padded]
        os_ = orders[pairs_order[chunk]][padded]
        logs[chunk] = np.asarray(batched(jnp.asarray(xs), jnp.asarray(os_)), np.float64)[:size]
    laws = np.exp(logs).reshape(len(orders), len(configurations))
    consistent = np.all(configurations[:, mask] == values[mask], axis=1)
    return np.where(consistent[None, :], laws, 0.0)


def fixed_order_law(
    oracle: AnyOrderOracle,
    order: ArrayLike,
    observed: ArrayLike | None = None,
    observed_mask: ArrayLike | None = None,
) -> np.ndarray:
    r""":math:`p_\sigma` along the permutation ``order``, a ``float64`` table ``(q,) * n``."""
    n, q = oracle.num_positions, oracle.num_categories
    order = np.asarray(order, np.int32)
    if sorted(order.tolist()) != list(range(n)):
        raise InputError(f"order must be a permutation of range({n}), got {order.tolist()}")
    mask = np.zeros(n, bool) if observed_mask is None else np.asarray(observed_mask, bool)
    free_order = order[~mask[order]][None, :]
    law = _laws(oracle, _full_orders(mask, free_order), observed, observed_mask)[0]
    return law.reshape((q,) * n)


def random_order_law(
    oracle: AnyOrderOracle,
    observed: ArrayLike | None = None,
    observed_mask: ArrayLike | None = None,
) -> np.ndarray:
    r""":math:`p_{\text{mix}} = \mathbb{E}_\sigma p_\sigma` over the :math:`(n - |O|)!` orders of
    the free sites, by enumeration.

    :param oracle: an :class:`~numpyro_autospec.oracles.AnyOrderOracle` on :math:`[q]^n`.
    :param observed: ``[n]`` observed values, read where ``observed_mask`` is set.
    :param observed_mask: ``[n]`` bool, the observed sites :math:`O` (default: none).
    :returns: a ``float64`` table of shape ``(q,) * n``.
    :raises InputError: if the inputs have the wrong shape or there are too many to enumerate.

    >>> import numpy as np
    >>> from numpyro_autospec.oracles import TableOracle
    >>> table = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> law = random_order_law(TableOracle(np.log(table)), [1, 0], [True, False])
    >>> np.round(law, 6).tolist()  # mu(x_1 | x_0 = 1), zero where x_0 != 1
    [[0.0, 0.0], [0.4, 0.6]]
    """
    n, q = oracle.num_positions, oracle.num_categories
    mask = np.zeros(n, bool) if observed_mask is None else np.asarray(observed_mask, bool)
    free_sites = np.flatnonzero(~mask)
    free_orders = np.array(list(itertools.permutations(free_sites)), np.int32).reshape(
        math.factorial(len(free_sites)), len(free_sites)
    )
    laws = _laws(oracle, _full_orders(mask, free_orders), observed, observed_mask)
    return laws.mean(axis=0).reshape((q,) * n)
