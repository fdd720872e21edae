"""Cumulative sums and maxima with short windows on every backend.

``jnp.cumsum`` and ``lax.cummax`` lower to a windowed reduction, which XLA:CPU computes
without a scan kernel: along a long axis its windows are long (along a digits diffusion path
``[4096, 64]`` 2.8x slower than a parallel prefix scan), while a parallel prefix scan
(:func:`jax.lax.associative_scan`) unrolls into ``2 log2(n)`` slices and pads that make large,
slow-to-compile fusions.  These two functions split the axis into blocks of about
``sqrt(n)`` steps: a scan within each block, then over the blocks' totals, and one
combination (a handful of kernels for any length).  A short scan (``n * n * m`` pairs at most
:data:`PAIRS`, ``m`` elements per step) is one fused reduction over the pairs ``j <= i``, which
XLA:CPU computes as a single kernel; a longer one is the library's reduction.  The samplers'
cumulative sums (the Curie-Weiss and Hopfield block forms, the diffusion speculation, block
verification) go through them.

Floating-point sums are added in another order than ``jnp.cumsum``'s, so they may differ in
the last bits; the samplers all call the same function, so the engine's draws still equal the
reference sampler's, key for key.
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
    >>> prefix_sum(jnp.array([1, 2, 3, 4])).tolist()
    [1, 3, 6, 10]
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

#: a scan of an axis of ``n`` steps over ``m`` elements each (``n * n * m`` pairs) at most this
#: large is one fused reduction over the pairs ``j <= i``, not a windowed reduction (which
#: XLA:CPU splits into a tree of several kernels)
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
    """``library(values, axis=axis)``, in blocks of about ``sqrt(n)`` along a long axis (the
    module docstring), each block's scan a reduction over pairs where that is cheap;
    ``identity`` pads the last block (``None``: the dtype's lowest)."""
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
