"""Cumulative sums and maxima with short windows on every backend.

``jnp.cumsum`` and ``lax.cummax`` lower on XLA:CPU to a windowed reduction that is slow along
a long axis (2.8x a parallel scan on a ``[4096, 64]`` diffusion path), and
:func:`jax.lax.associative_scan` makes large, slow-to-compile fusions.  These functions scan
blocks of about ``sqrt(n)`` steps, then the blocks' totals; a short scan (at most
:data:`PAIRS` pairs) is one fused reduction over the pairs ``j <= i``.  Sums may differ from
``jnp.cumsum``'s in the last bits; every sampler calls the same function, so draws still agree
key for key.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

__all__ = ["prefix_sum", "prefix_max"]


def prefix_sum(values: ArrayLike, axis: int = 0) -> Array:
    """``jnp.cumsum(values, axis)``, in windows of about ``sqrt(n)`` steps.

    >>> import jax.numpy as jnp
    >>> prefix_sum(jnp.ones((2, 3)), axis=1).tolist()
    [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    return _prefix_scan(values, axis, jnp.add, jnp.sum, jnp.cumsum, 0)


def prefix_max(values: ArrayLike, axis: int = 0) -> Array:
    """``jax.lax.cummax(values, axis)``, in windows of about ``sqrt(n)`` steps.

    >>> import jax.numpy as jnp
    >>> prefix_max(jnp.array([0.0, -1.0, 2.0, 1.0])).tolist()
    [0.0, 0.0, 2.0, 2.0]
    """
    return _prefix_scan(values, axis, jnp.maximum, jnp.max, jax.lax.cummax, None)


#: axes up to this long take one window
SHORT = 256

#: a scan of ``n`` steps of ``m`` elements with ``n * n * m`` at most this is a pairs reduction
PAIRS = 1 << 16


def _scan(values: Array, reduce: Callable, library: Callable[..., Array], identity) -> Array:
    """``library(values, axis=0)``: over every pair of steps where that is cheap."""
    n = values.shape[0]
    if n * n * math.prod(values.shape[1:]) > PAIRS:
        return library(values, axis=0)
    index = jnp.arange(n)
    lower = (index[None, :] <= index[:, None]).reshape((n, n) + (1,) * (values.ndim - 1))
    return reduce(jnp.where(lower, values[None], identity), axis=1)


def _prefix_scan(
    values: ArrayLike,
    axis: int,
    combine: Callable,
    reduce: Callable,
    library: Callable[..., Array],
    identity,
) -> Array:
    """``library(values, axis=axis)`` in blocks of about ``sqrt(n)``; ``identity`` pads the
    last block (``None``: the dtype's lowest)."""
    values = jnp.moveaxis(jnp.asarray(values), axis, 0)
    n = values.shape[0]
    if identity is None:
        dtype = values.dtype
        identity = -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min
    if n <= SHORT:
        return jnp.moveaxis(_scan(values, reduce, library, identity), 0, axis)
    width = math.isqrt(n - 1) + 1
    blocks = -(-n // width)
    rest = values.shape[1:]
    padding = jnp.full((blocks * width - n, *rest), identity, values.dtype)
    grid = jnp.concatenate([values, padding]).reshape(blocks, width, *rest)
    inner = jnp.moveaxis(_scan(jnp.moveaxis(grid, 1, 0), reduce, library, identity), 0, 1)
    totals = _scan(inner[:, -1], reduce, library, identity)
    carried = jnp.concatenate([jnp.full((1, *rest), identity, values.dtype), totals[:-1]])
    scanned = combine(inner, carried[:, None]).reshape(blocks * width, *rest)[:n]
    return jnp.moveaxis(scanned, 0, axis)
