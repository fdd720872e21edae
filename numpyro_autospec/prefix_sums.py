"""Cumulative sums and maxima that cost ``O(n log n)`` work on every backend.

``jnp.cumsum`` and ``lax.cummax`` lower to a windowed reduction, which XLA:CPU computes
without a scan kernel: along a digits diffusion path ``[4096, 64]`` it is 2.8x slower than a
parallel prefix scan, along the ``[1024, 512]`` one-hot counts of the Potts-like benchmark
oracle 4.5x (``benchmarks/prefix_sums.py``; docs/benchmarks.md, "Prefix sums on the CPU, and
the Curie-Weiss chain's step").  On the GPU ``jnp.cumsum`` has its own kernel and stays.  The
samplers' cumulative sums (the Curie-Weiss and Hopfield block forms, the diffusion
speculation, block verification) go through these two functions, which take the prefix scan
(:func:`jax.lax.associative_scan`) when the program is lowered for the CPU and ``jnp``'s own
operation elsewhere (:func:`jax.lax.platform_dependent`: one branch is compiled).

Floating-point sums are added in another order than ``jnp.cumsum``'s, so they may differ in
the last bits; the samplers all call the same function, so the engine's draws still equal the
reference sampler's, key for key.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

__all__ = ["prefix_sum", "prefix_max"]


def prefix_sum(values: ArrayLike, axis: int = 0) -> Array:
    """``jnp.cumsum(values, axis)``, as a parallel prefix scan on the CPU.

    >>> import jax.numpy as jnp
    >>> prefix_sum(jnp.array([1, 2, 3, 4])).tolist()
    [1, 3, 6, 10]
    >>> prefix_sum(jnp.ones((2, 3)), axis=1).tolist()
    [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    return _prefix_scan(values, axis, jnp.add, jnp.cumsum)


def prefix_max(values: ArrayLike, axis: int = 0) -> Array:
    """``jax.lax.cummax(values, axis)``, as a parallel prefix scan on the CPU.

    >>> import jax.numpy as jnp
    >>> prefix_max(jnp.array([0.0, -1.0, 2.0, 1.0])).tolist()
    [0.0, 0.0, 2.0, 2.0]
    """
    return _prefix_scan(values, axis, jnp.maximum, jax.lax.cummax)


def _prefix_scan(
    values: ArrayLike, axis: int, combine: Callable, library: Callable[..., Array]
) -> Array:
    """``library(values, axis=axis)`` where the program is not lowered for the CPU, else the
    same prefix reduction by ``combine`` as a parallel scan (one branch is compiled)."""
    return jax.lax.platform_dependent(
        jnp.asarray(values),
        cpu=lambda v: jax.lax.associative_scan(combine, v, axis=axis),
        default=lambda v: library(v, axis=axis),
    )
