r"""Checks that an oracle's block form agrees with its set form, and has the right shape.

Row :math:`j` of ``log_conditionals(x, ranks, sites, prefix_lengths)`` must equal row
``sites[j]`` of ``log_marginals(x, ranks < prefix_lengths[j])`` (docs/algorithm.md, section 2a),
else the samplers draw from neither form's law.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core.parameters import abstract_output, jit_over_parameters
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles._base import AnyOrderOracle, marginal_conditionals

__all__ = ["check_block_form", "check_block_form_signature"]


@jit_over_parameters
def _block_form(oracle: AnyOrderOracle, x, ranks, sites, prefix_lengths) -> Array:
    """``oracle.log_conditionals``, traced once per oracle structure and shapes."""
    return oracle.log_conditionals(x, ranks, sites, prefix_lengths)


def check_block_form_signature(oracle: AnyOrderOracle, *, name: str = "oracle") -> None:
    """Check abstractly that ``oracle.log_conditionals`` maps ``(int32[n], int32[n], int32[2],
    int32[2])`` to a float ``[2, q]`` array, else raise :class:`OracleError`.

    >>> class OneRow(AnyOrderOracle):
    ...     num_positions, num_categories = 3, 2
    ...     def log_conditionals(self, x, ranks, sites, prefix_lengths):
    ...         return jnp.zeros(2)  # one row of q values, not L rows
    >>> check_block_form_signature(OneRow(), name="OneRow")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: OneRow: log_conditionals must return one array of \
shape (L, 2) = (2, 2) for L = 2 requested rows, got (2,)
    """
    n, q = oracle.num_positions, oracle.num_categories
    specs = tuple(jax.ShapeDtypeStruct((size,), jnp.int32) for size in (n, n, 2, 2))
    expected = (
        f"{name}: log_conditionals must return one array of shape (L, {q}) = (2, {q}) for "
        f"L = 2 requested rows"
    )
    output = abstract_output(
        lambda: _block_form.eval_shape(oracle, *specs),
        OracleError,
        f"{name}: log_conditionals could not be traced on (x: int32[{n}], ranks: "
        f"int32[{n}], sites: int32[2], prefix_lengths: int32[2])",
        expected,
    )
    if output.shape != (2, q):
        raise OracleError(f"{expected}, got {output.shape}")
    if not jnp.issubdtype(output.dtype, jnp.floating):
        raise OracleError(f"{name}: log_conditionals must return floats, got {output.dtype}")


def check_block_form(
    oracle: AnyOrderOracle,
    *,
    key: Array | None = None,
    num_probes: int = 8,
    atol: float = 1e-4,
    name: str = "oracle",
) -> None:
    """Compare ``oracle.log_conditionals`` with the block form derived from its
    ``log_marginals`` on ``num_probes`` random inputs (random values, order and prefix lengths).

    :param oracle: a set-form oracle (``depends_on_order`` False).
    :param key: PRNG key of the probes (default ``jax.random.PRNGKey(0)``).
    :param atol: tolerance on the probabilities (so ``-inf`` entries agree).
    :raises OracleError: naming the first probe, row and site where the forms differ.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.oracles import AnyOrderOracle, CurieWeissOracle
    >>> check_block_form(CurieWeissOracle(4, beta=0.5))  # its one-pass block form agrees
    >>> class Inconsistent(AnyOrderOracle):
    ...     num_positions, num_categories, scores_blocks = 3, 2, True
    ...     def log_marginals(self, x, mask):
    ...         return jnp.full((3, 2), jnp.log(0.5))
    ...     def log_conditionals(self, x, ranks, sites, prefix_lengths):
    ...         return jnp.log(jnp.tile(jnp.array([0.9, 0.1]), (sites.shape[0], 1)))
    >>> check_block_form(Inconsistent(), name="Inconsistent")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: Inconsistent: log_conditionals disagrees with \
log_marginals: probe 0, row 0 (site ...): probabilities differ by 0.4 > 0.0001
    """
    if oracle.depends_on_order:
        raise OracleError(f"{name}: depends on the order of the prefix: it has no set form")
    check_block_form_signature(oracle, name=name)
    n, q = oracle.num_positions, oracle.num_categories
    key = jax.random.PRNGKey(0) if key is None else key

    def probe(key: Array) -> tuple[Array, Array, Array]:
        k_values, k_order, k_lengths = jax.random.split(key, 3)
        x = jax.random.randint(k_values, (n,), 0, q, dtype=jnp.int32)
        order = jax.random.permutation(k_order, n).astype(jnp.int32)
        ranks = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
        lengths = jax.random.randint(k_lengths, (n,), 0, n, dtype=jnp.int32)
        sites = order[jnp.maximum(lengths, jnp.arange(n) % n)]
        block = oracle.log_conditionals(x, ranks, sites, lengths)
        derived = marginal_conditionals(oracle.log_marginals, x, ranks, sites, lengths)
        return block, derived, sites

    block, derived, sites = jax.jit(jax.vmap(probe))(jax.random.split(key, num_probes))
    difference = np.abs(np.exp(np.asarray(block, np.float64)) - np.exp(np.asarray(derived)))
    difference = np.where(np.isnan(difference), np.inf, difference)
    if np.all(difference <= atol):
        return
    probe_index, row = np.unravel_index(np.argmax(difference.max(axis=-1)), difference.shape[:2])
    raise OracleError(
        f"{name}: log_conditionals disagrees with log_marginals: probe {probe_index}, row "
        f"{row} (site {int(sites[probe_index, row])}): probabilities differ by "
        f"{float(difference[probe_index, row].max()):.3g} > {atol:g}"
    )
