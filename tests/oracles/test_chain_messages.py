"""The chain's forward-backward in linear space equals the log-space pass wherever it is used,
and log space answers beyond the bound, where linear space would fail."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec.oracles._chain_messages import (
    LINEAR_SPACE_BOUND,
    chain_log_marginals,
    linear_space_marginals,
    log_space_marginals,
)

both_passes = jax.jit(
    jax.vmap(
        lambda c, f, x, m: (linear_space_marginals(c, f, x, m), log_space_marginals(c, f, x, m)),
        in_axes=(None, None, 0, 0),
    )
)


@pytest.mark.parametrize("n", [1, 2, 7, 300])
@pytest.mark.parametrize("seed", [0, 1])
def test_linear_space_equals_log_space_up_to_the_bound(n, seed):
    """Chains scaled to sit on the bound (``4 max|J| + 2 max|h| = 64``), with queries that pin
    values against the couplings (random values on random masks): the same rows to float32
    rounding, and the same pinned (-inf) entries."""
    rng = np.random.default_rng(seed)
    couplings, fields = rng.normal(size=n - 1), rng.normal(size=n)
    size = 4 * np.max(np.abs(couplings), initial=0.0) + 2 * np.max(np.abs(fields))
    couplings, fields = (
        (couplings, fields)
        if size == 0
        else (
            couplings * LINEAR_SPACE_BOUND / size,
            fields * LINEAR_SPACE_BOUND / size,
        )
    )
    couplings, fields = jnp.asarray(couplings, jnp.float32), jnp.asarray(fields, jnp.float32)
    xs = jnp.asarray(rng.integers(0, 2, size=(64, n)), jnp.int32)
    masks = jnp.asarray(rng.random((64, n)) < rng.random((64, 1)))
    linear, log = (
        np.asarray(rows, np.float64) for rows in both_passes(couplings, fields, xs, masks)
    )
    assert np.array_equal(np.isneginf(linear), np.isneginf(log))
    assert np.all(np.isfinite(log) | np.isneginf(log))
    finite = np.isfinite(log)
    np.testing.assert_allclose(linear[finite], log[finite], atol=2e-5)
    chosen = jax.vmap(chain_log_marginals, in_axes=(None, None, 0, 0))(couplings, fields, xs, masks)
    np.testing.assert_array_equal(np.asarray(chosen, np.float64), linear)


def test_beyond_the_bound_log_space_answers_where_linear_space_fails():
    """A free site between two pinned sites of opposite spins under couplings of 50: by
    symmetry 1/2 each.  Linear space underflows to 0/0 there (the reason for the bound);
    the oracle's rows come from log space."""
    couplings, fields = jnp.full(2, 50.0), jnp.zeros(3)
    x, mask = jnp.array([1, 0, 0]), jnp.array([True, False, True])
    assert 4 * 50.0 > LINEAR_SPACE_BOUND
    assert np.isnan(np.asarray(linear_space_marginals(couplings, fields, x, mask))[1]).all()
    rows = np.exp(np.asarray(chain_log_marginals(couplings, fields, x, mask), np.float64))
    np.testing.assert_allclose(rows, [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]], atol=1e-6)


def test_batched_queries_run_one_pass():
    """With the parameters shared by a batch of queries (as in the engine's rounds), the
    choice stays a ``cond`` under ``vmap``: one pass runs, not both."""
    couplings, fields = jnp.full(15, 0.2), jnp.zeros(16)
    xs, masks = jnp.zeros((4, 16), jnp.int32), jnp.zeros((4, 16), bool)
    batched = jax.vmap(chain_log_marginals, in_axes=(None, None, 0, 0))
    equations = jax.make_jaxpr(batched)(couplings, fields, xs, masks).jaxpr.eqns
    assert [e.primitive.name for e in equations].count("cond") == 1
