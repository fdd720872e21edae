r"""The any-order oracle protocol.

An *any-order oracle* is a JAX-traceable callable

.. code-block:: text

    log_marginals(x: int32[n], mask: bool[n]) -> float[n, q]

whose row :math:`i` is :math:`\log \mu(X_i = \cdot \mid X_S = x_S)` with :math:`S` the sites
where ``mask`` is set (the *pinned* sites).  The contract (ALGORITHM.md section 2a; Anari et al.,
"Parallel Sampling via Autospeculation", arXiv:2511.07869):

- rows of unpinned sites are log-probability vectors (logsumexp 0); ``-inf`` is the legal
  log-probability of an impossible value, ``NaN`` and ``+inf`` are never legal;
- rows of pinned sites may hold anything but NaN;
- the answer depends on ``x`` only through ``x[mask]``;
- static shapes, no Python control flow on traced values, no implicit rank promotion: the engine
  calls ``jax.jit(jax.vmap(oracle))`` on batches of queries whose masks have different sizes.

Plain functions are oracles too; the caller then passes :math:`n` and :math:`q`.
:mod:`numpyro_autospec.oracles.validation` checks an oracle against this contract.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from jax import Array

__all__ = ["AnyOrderOracle"]


@runtime_checkable
class AnyOrderOracle(Protocol):
    """An any-order oracle that knows its shape: ``num_positions`` :math:`n` sites with
    ``num_categories`` :math:`q` values each, ``__call__(x, mask) -> [n, q]`` log-marginals.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> isinstance(CurieWeissOracle(4, beta=0.5), AnyOrderOracle)
    True
    >>> uniform = lambda x, mask: jnp.full((4, 3), -jnp.log(3.0))  # a plain-function oracle
    >>> isinstance(uniform, AnyOrderOracle)
    False
    """

    num_positions: int
    num_categories: int

    def __call__(self, x: Array, mask: Array) -> Array:
        """``float[n, q]`` log conditional marginals given ``x`` on ``mask``."""
        ...
