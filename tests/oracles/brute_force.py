"""Brute-force references for the oracle tests: explicit joints and conditionals by enumeration.

Everything here is float64 NumPy and enumerates :math:`[q]^n`, so it is only for small ``n``.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np


def configurations(num_positions: int, num_categories: int) -> np.ndarray:
    """All of :math:`[q]^n` in row-major order, shape ``[q^n, n]``."""
    return np.array(
        list(itertools.product(range(num_categories), repeat=num_positions)), np.int64
    ).reshape(-1, num_positions)


def logsumexp(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """float64 logsumexp, ``-inf`` for an empty or all ``-inf`` reduction."""
    values = np.asarray(values, np.float64)
    peak = np.max(values, axis=axis, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(values - peak), axis=axis, keepdims=True)) + peak
    return total.reshape(()) if axis is None else np.squeeze(total, axis=axis)


def conditional_marginals(
    log_joint: np.ndarray, num_categories: int, x: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """Row ``i`` = :math:`\\log \\mu(X_i = \\cdot \\mid X_S = x_S)` by enumeration, ``[n, q]``.

    ``log_joint`` is flat over :func:`configurations`; zero-probability conditioning events
    give uniform rows (the convention of the exact oracles)."""
    flat = np.asarray(log_joint, np.float64).reshape(-1)
    num_positions = round(np.log(flat.size) / np.log(num_categories))
    configs = configurations(num_positions, num_categories)
    consistent = np.all((configs == np.asarray(x)[None, :]) | ~np.asarray(mask)[None, :], axis=1)
    weights = np.where(consistent, flat, -np.inf)
    rows = np.array(
        [
            [logsumexp(weights[configs[:, site] == value]) for value in range(num_categories)]
            for site in range(num_positions)
        ]
    )
    total = logsumexp(rows, axis=1)[:, None]
    if not np.all(np.isfinite(total)):
        return np.full(rows.shape, -np.log(num_categories))
    return rows - total


def curie_weiss_log_joint(num_positions: int, beta: float, h: float) -> np.ndarray:
    """Normalized flat log-joint of the Curie-Weiss model."""
    spins = 2.0 * configurations(num_positions, 2) - 1.0
    magnetization = spins.sum(axis=1)
    log_weights = beta / (2 * num_positions) * magnetization**2 + h * magnetization
    return log_weights - logsumexp(log_weights)


def ising_chain_log_joint(couplings: np.ndarray, fields: np.ndarray) -> np.ndarray:
    """Normalized flat log-joint of the Ising chain."""
    spins = 2.0 * configurations(len(fields), 2) - 1.0
    log_weights = spins @ np.asarray(fields, np.float64) + (spins[:, :-1] * spins[:, 1:]) @ (
        np.asarray(couplings, np.float64)
    )
    return log_weights - logsumexp(log_weights)


def random_queries(
    rng: np.random.Generator, num_positions: int, num_categories: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random ``(x, mask)`` pairs: masks of uniformly random sizes, the empty mask
    first and a mask with one free site second."""
    xs = rng.integers(0, num_categories, size=(count, num_positions)).astype(np.int32)
    sizes = rng.integers(0, num_positions + 1, size=count)
    sizes[0] = 0
    sizes[1 % count] = num_positions - 1 if count > 1 else 0
    ranks = np.argsort(rng.random((count, num_positions)), axis=1)
    return xs, ranks < sizes[:, None]


def batched_answers(oracle, xs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """``jit(vmap(oracle))`` on a batch of queries, as float64 NumPy ``[batch, n, q]``."""
    answers = jax.jit(jax.vmap(oracle))(jnp.asarray(xs, jnp.int32), jnp.asarray(masks))
    return np.asarray(answers, np.float64)


def assert_rows_close(actual: np.ndarray, expected: np.ndarray, mask: np.ndarray, atol: float):
    """Unpinned rows agree (``-inf`` where expected is ``-inf``); pinned rows are ignored."""
    free = ~np.asarray(mask)
    actual, expected = np.asarray(actual)[free], np.asarray(expected)[free]
    np.testing.assert_array_equal(np.isneginf(actual), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], atol=atol, rtol=0)
