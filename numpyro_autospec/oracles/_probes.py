r"""Eager probes of an any-order oracle at the start of sampling: its answers on a batch of probe
inputs (:func:`validate_oracle`, set form) or the block-form rows of every site along one order
(:func:`validate_log_conditionals`, order-dependent oracles), each one compiled call per oracle
structure and shapes, its defects reported as an :class:`~numpyro_autospec.errors.OracleError`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core.parameters import jit_over_parameters, staged_constants
from numpyro_autospec.errors import (
    ConfigError,
    OracleError,
    describe_defect,
    first_line,
    raise_if_defect,
)
from numpyro_autospec.oracles._validation import (
    OracleDefect,
    check_oracle_signature,
    log_marginals_defect,
)

__all__ = ["validate_log_conditionals", "validate_oracle"]


def _probe_inputs(key: Array, n: int, q: int, num_probes: int) -> tuple[np.ndarray, np.ndarray]:
    """Random values in ``[0, q)`` and masks (the empty mask, one free site, random sizes),
    drawn with NumPy from a seed taken from ``key``."""
    if jnp.issubdtype(getattr(key, "dtype", np.uint32), jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    rng = np.random.default_rng(np.asarray(key).astype(np.uint64).ravel())
    values = rng.integers(0, q, size=(num_probes, n)).astype(np.int32)
    sizes = rng.integers(0, n + 1, size=num_probes)
    sizes[0] = 0
    if num_probes > 1:
        sizes[1] = n - 1
    ranks = np.argsort(rng.random((num_probes, n)), axis=1)
    return values, ranks < sizes[:, None]


@jit_over_parameters
def _probe(oracle, values: Array, masks: Array, atol: Array) -> tuple[Array, OracleDefect]:
    """The oracle's answers on a batch of probe inputs and their defects, in one compiled call."""
    with staged_constants():
        answers = jax.vmap(oracle)(values, masks)
        defects = jax.vmap(lambda a, m: log_marginals_defect(a, m, atol=atol))(answers, masks)
    return answers, defects


@jit_over_parameters
def _order_probe(oracle, steps: Array) -> OracleDefect:
    """The defect of the block-form rows of every site along the identity order (values 0)."""
    with staged_constants():
        rows = oracle.log_conditionals(jnp.zeros_like(steps), steps, steps, steps)
        return log_marginals_defect(rows, jnp.zeros(steps.shape, bool))


def validate_log_conditionals(oracle, num_positions: int, *, name: str = "oracle") -> None:
    """Eager check of an order-dependent oracle: the block-form rows of every site along the
    identity order (values 0) must be normalized; raise :class:`OracleError` otherwise.

    >>> from numpyro_autospec.oracles import AnyOrderOracle
    >>> class Halves(AnyOrderOracle):
    ...     num_positions, num_categories, depends_on_order = 4, 2, True
    ...     def log_conditionals(self, x, ranks, sites, prefix_lengths):
    ...         return jnp.full((sites.shape[0], 2), jnp.log(0.4))  # rows sum to 0.8
    >>> validate_log_conditionals(Halves(), 4, name="Halves")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: Halves returned row 0 that is not normalized; the \
row of an unpinned site must be log-probabilities with logsumexp 0
    """
    code, row = _order_probe(oracle, jnp.arange(int(num_positions), dtype=jnp.int32))
    raise_if_defect(code, row, name=name)


def validate_oracle(
    oracle: Callable[[Array, Array], Array],
    num_positions: int,
    num_categories: int,
    *,
    name: str = "oracle",
    key: Array | None = None,
    num_probes: int = 8,
    atol: float = 1e-4,
) -> None:
    """Eager check of an oracle: its signature, then its answers on probe inputs (the empty mask,
    one free site, random masks) in one ``jit(vmap(oracle))`` call, which also tests batching.

    :param oracle: the oracle.
    :param num_positions: :math:`n`.
    :param num_categories: :math:`q`.
    :param name: how error messages refer to the oracle.
    :param key: PRNG key of the probes (default ``jax.random.PRNGKey(0)``).
    :param num_probes: number of probe inputs (at least 1).
    :param atol: tolerance on the logsumexp of a row.
    :raises OracleError: on the first defect, naming the row, the problem and the probe.

    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> validate_oracle(CurieWeissOracle(6, beta=1.0), 6, 2)
    >>> validate_oracle(lambda x, mask: jnp.zeros((6, 2)), 6, 2, name="bad")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: bad returned row 0 that is not normalized \
(logsumexp=0.693147); ...
    """
    check_oracle_signature(oracle, num_positions, num_categories, name=name)
    if num_probes < 1:
        raise ConfigError(f"num_probes must be at least 1, got {num_probes}")
    n, q = int(num_positions), int(num_categories)
    values, masks = _probe_inputs(np.zeros(2, np.uint32) if key is None else key, n, q, num_probes)

    try:
        answers, (codes, rows) = _probe(
            oracle, jnp.asarray(values), jnp.asarray(masks), jnp.float32(atol)
        )
    except Exception as error:
        raise OracleError(
            f"{name} failed under jax.jit(jax.vmap(...)) on a batch of {num_probes} "
            f"queries: {type(error).__name__}: {first_line(error)}"
        ) from error
    codes, rows = np.asarray(codes), np.asarray(rows)
    defective = np.flatnonzero(codes)
    if defective.size == 0:
        return
    probe_index = int(defective[0])
    row = int(rows[probe_index])
    answer_row = np.asarray(answers[probe_index, row], np.float64)
    finite = answer_row[np.isfinite(answer_row)]
    log_normalizer = np.logaddexp.reduce(finite) if finite.size else -np.inf
    pinned = np.flatnonzero(masks[probe_index]).tolist()
    message = describe_defect(codes[probe_index], row, name=name, log_normalizer=log_normalizer)
    raise OracleError(f"{message} (probe {probe_index}: pinned sites {pinned})")
