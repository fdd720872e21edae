r"""Checks that an any-order oracle and the inputs of an any-order site meet the contract.

:func:`check_oracle_signature` checks the output shape abstractly; :func:`log_marginals_defect`
turns one answer into an int32 ``(code, row)`` pair inside compiled code (the host raises with
:func:`~numpyro_autospec.errors.raise_if_defect`); the other checks validate concrete user inputs
and name the offending entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import abstract_output
from numpyro_autospec.errors import (
    DEFECT_INFINITE,
    DEFECT_NAN,
    DEFECT_OK,
    DEFECT_UNNORMALIZED,
    InputError,
    OracleError,
    positive_integer,
)

__all__ = [
    "OracleDefect",
    "check_observed",
    "check_oracle_signature",
    "check_order_and_observed",
    "check_permutation",
    "check_values_in_support",
    "log_marginals_defect",
]


class OracleDefect(NamedTuple):
    """The first defect of one answer: int32 ``code`` (``DEFECT_*``) and ``row`` (0 if ok)."""

    code: Array
    row: Array


def check_oracle_signature(
    oracle: Callable[[Array, Array], Array],
    num_positions: int,
    num_categories: int,
    *,
    name: str = "oracle",
) -> None:
    """Check abstractly that ``oracle(x, mask)`` maps ``(int32[n], bool[n])`` to float ``[n, q]``.

    No computation runs (:func:`jax.eval_shape`); raises :class:`OracleError` for a bad ``n``
    or ``q``, a non-callable, a tracing failure or a wrong output.
    """
    n = positive_integer(num_positions, "num_positions", OracleError)
    q = positive_integer(num_categories, "num_categories", OracleError)
    if not callable(oracle):
        raise OracleError(f"{name} must be callable, got {type(oracle).__name__}")
    x_spec = jax.ShapeDtypeStruct((n,), jnp.int32)
    mask_spec = jax.ShapeDtypeStruct((n,), jnp.bool_)
    output = abstract_output(
        lambda: jax.eval_shape(oracle, x_spec, mask_spec),
        OracleError,
        f"{name} could not be traced on (x: int32[{n}], mask: bool[{n}])",
        f"{name} must return one array of shape ({n}, {q})",
    )
    if output.shape != (n, q) or not jnp.issubdtype(output.dtype, jnp.floating):
        raise OracleError(
            f"{name} must return log-marginals of shape ({n}, {q}) with a floating "
            f"dtype, got shape {output.shape} and dtype {output.dtype}"
        )


def log_marginals_defect(log_probs: ArrayLike, mask: ArrayLike, *, atol: float = 1e-4):
    """The first defect of one answer ``log_probs: [n, q]`` given ``mask: bool[n]``.

    The code is ``DEFECT_NAN`` if any entry is NaN, else ``DEFECT_INFINITE`` if an unpinned row
    holds ``+inf``, else ``DEFECT_UNNORMALIZED`` if an unpinned row has
    :math:`|\\operatorname{logsumexp}| > \\text{atol}`, else ``DEFECT_OK``; ``row`` is the first
    offending row (0 if ok).  Pure :mod:`jax.numpy`, ``jit`` and ``vmap`` safe.
    """
    log_probs = jnp.asarray(log_probs)
    free = ~jnp.asarray(mask, bool)
    # a rank per row (3 NaN, 2 +inf on a free row, 1 unnormalized free row) and the first row
    # reaching the maximum; log-probabilities are at most 0, so the sum needs no shift
    bad = jnp.isnan(log_probs) | (log_probs == jnp.inf)
    nan_rows = jnp.any(jnp.isnan(log_probs), axis=-1)
    posinf_rows = jnp.any(log_probs == jnp.inf, axis=-1) & free
    total = jnp.log(jnp.sum(jnp.exp(jnp.where(bad, -jnp.inf, log_probs)), axis=-1))
    unnormalized_rows = ~(jnp.abs(total) <= atol) & free
    rank = jnp.where(nan_rows, 3, jnp.where(posinf_rows, 2, jnp.where(unnormalized_rows, 1, 0)))
    row = jnp.argmax(rank).astype(jnp.int32)
    worst = rank[row]
    codes = (DEFECT_NAN, DEFECT_INFINITE, DEFECT_UNNORMALIZED)
    code = jnp.select([worst == 3, worst == 2, worst == 1], codes, DEFECT_OK).astype(jnp.int32)
    return OracleDefect(code, jnp.where(worst > 0, row, 0).astype(jnp.int32))


def check_values_in_support(values: ArrayLike, num_categories: int, *, name: str = "x") -> None:
    """Check that concrete integer ``values`` (any shape) lie in :math:`[0, q)`, else raise
    :class:`InputError` naming the site ``name``, the first offending index and its value."""
    if isinstance(values, jax.core.Tracer):
        raise InputError(f"site {name!r}: values must be concrete, not traced")
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        raise InputError(f"site {name!r}: values must have an integer dtype, got {values.dtype}")
    outside = np.argwhere((values < 0) | (values >= num_categories))
    if outside.size:
        index = tuple(int(i) for i in outside[0])
        index_text = index[0] if len(index) == 1 else index
        raise InputError(
            f"site {name!r}: value {int(values[index])} at index {index_text} is outside "
            f"the support [0, {num_categories})"
        )


def check_permutation(order: ArrayLike, num_positions: int, *, name: str = "order") -> None:
    """Check that a concrete ``order`` is a permutation of ``range(n)``, else raise
    :class:`InputError` (a wrong shape or dtype, a value out of range, or a duplicate)."""
    if isinstance(order, jax.core.Tracer):
        raise InputError(f"{name} must be concrete, not traced")
    order = np.asarray(order)
    n = int(num_positions)
    if order.shape != (n,):
        raise InputError(f"{name} must have shape ({n},) (a permutation), got {order.shape}")
    if not np.issubdtype(order.dtype, np.integer):
        raise InputError(f"{name} must have an integer dtype, got {order.dtype}")
    outside = order[(order < 0) | (order >= n)]
    if outside.size:
        raise InputError(
            f"{name} is not a permutation of range({n}): value {int(outside[0])} is out of range"
        )
    counts = np.bincount(order.astype(np.int64), minlength=n)
    if np.any(counts != 1):
        duplicated = int(np.flatnonzero(counts > 1)[0])
        missing = int(np.flatnonzero(counts == 0)[0])
        raise InputError(
            f"{name} is not a permutation of range({n}): {duplicated} appears "
            f"{int(counts[duplicated])} times and {missing} is missing"
        )


def check_observed(
    values: ArrayLike,
    mask: ArrayLike,
    num_positions: int,
    num_categories: int,
    *,
    owner: str | None = None,
    error: type[Exception] = InputError,
) -> tuple[np.ndarray, np.ndarray]:
    """Observed ``values`` (read where ``mask`` is set) and their bool ``mask`` as numpy arrays
    of shape ``[n]``, checked; a wrong shape or dtype raises ``error`` (message prefixed by
    ``owner``), values outside :math:`[0, q)` raise :class:`InputError`.

    >>> values, mask = check_observed([1, 0], [True, False], 2, 2)
    >>> check_observed([1, 0], [1, 0], 2, 2, owner="MyOracle", error=OracleError)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: MyOracle: need values of shape (2,) and a bool mask \
of shape (2,), got int64(2,) and int64(2,)
    """
    n = int(num_positions)
    values, mask = np.asarray(values), np.asarray(mask)
    if values.shape != (n,) or mask.shape != (n,) or mask.dtype != np.bool_:
        prefix = "" if owner is None else f"{owner}: "
        raise error(
            f"{prefix}need values of shape ({n},) and a bool mask of shape ({n},), got "
            f"{values.dtype}{values.shape} and {mask.dtype}{mask.shape}"
        )
    check_values_in_support(np.where(mask, values, 0), num_categories, name="values")
    return values, mask


def check_order_and_observed(
    order: ArrayLike,
    values: ArrayLike | None,
    mask: ArrayLike | None,
    num_positions: int,
    num_categories: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, values, mask)`` of a fixed-order sequential law, checked as numpy arrays
    (``values`` default zeros, ``mask`` default nothing observed); raises :class:`InputError`.

    >>> order, values, mask = check_order_and_observed([1, 0], None, None, 2, 3)
    >>> values.tolist(), mask.tolist()
    ([0, 0], [False, False])
    >>> check_order_and_observed([1, 0], [0, 5], [False, True], 2, 3)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.InputError: site 'values': value 5 at index 1 ... [0, 3)
    """
    n = int(num_positions)
    order = np.asarray(order)
    check_permutation(order, n)
    mask = np.zeros(n, bool) if mask is None else mask
    values = np.zeros(n, np.int64) if values is None else values
    values, mask = check_observed(values, mask, n, num_categories)
    return order, values, mask
