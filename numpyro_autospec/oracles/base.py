"""The any-order oracle protocol.

An oracle is a JAX-traceable callable ``log_marginals(x: int32[n], mask: bool[n]) ->
float[n, q]`` whose row ``i`` is :math:`\\log \\mu(X_i = \\cdot \\mid X_{\\text{mask}} =
x_{\\text{mask}})`.  Rows of pinned sites (``mask[i]``) may be anything but NaN; ``-inf`` is
the legal log-probability of an impossible value.  The answer may depend on ``x`` only
through ``x[mask]``.  Plain functions are oracles too (the caller passes ``n`` and ``q``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from jax import Array

__all__ = ["AnyOrderOracle"]


@runtime_checkable
class AnyOrderOracle(Protocol):
    num_positions: int
    num_categories: int

    def __call__(self, x: Array, mask: Array) -> Array: ...
