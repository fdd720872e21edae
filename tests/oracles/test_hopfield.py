"""HopfieldOracle: the logistic formula site by site, normalization, inconsistency, large n."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.oracles import HopfieldOracle, OracleError, hopfield_log_marginals
from tests.oracles.brute_force import batched_answers, configurations, logsumexp, random_queries

N, R = 7, 3

# Patterns, beta and h are arguments: one compilation for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(hopfield_log_marginals, in_axes=(None, None, None, 0, 0)))


def reference_log_marginals(patterns, beta, h, x, mask):
    """The formula of the docstring, one site and one pattern at a time, in float64."""
    num_patterns, n = patterns.shape
    spins = 2.0 * np.asarray(x) - 1.0
    overlaps = [
        sum(patterns[r, j] * spins[j] for j in range(n) if mask[j]) / n for r in range(num_patterns)
    ]
    rows = []
    for site in range(n):
        field = h + beta * sum(patterns[r, site] * overlaps[r] for r in range(num_patterns))
        rows.append([-math.log1p(math.exp(2 * field * s)) for s in (1.0, -1.0)])
    return np.array(rows)  # column v: log sigmoid(2 s_v field) with s_0 = -1, s_1 = +1


@given(
    seed=st.integers(0, 2**31 - 1),
    beta=st.floats(0.0, 5.0),
    h=st.floats(-2.0, 2.0),
)
def test_conditionals_follow_the_logistic_formula(seed, beta, h):
    rng = np.random.default_rng(seed)
    patterns = rng.choice([-1.0, 1.0], size=(R, N))
    xs, masks = random_queries(rng, N, 2, 6)
    answers = np.asarray(batched_core(patterns, beta, h, xs, masks), np.float64)
    for x, mask, answer in zip(xs, masks, answers, strict=True):
        expected = reference_log_marginals(patterns, beta, h, x, mask)
        np.testing.assert_allclose(answer, expected, atol=1e-5)
        np.testing.assert_allclose(logsumexp(answer, axis=1), 0.0, atol=1e-6)


def test_class_is_the_functional_core_under_jit_and_vmap():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(0), N, R, beta=2.0, h=0.1)
    xs, masks = random_queries(np.random.default_rng(1), N, 2, 5)
    batched = batched_answers(oracle, xs, masks)
    core = batched_core(oracle.patterns, 2.0, 0.1, xs, masks)
    np.testing.assert_allclose(batched, np.asarray(core, np.float64), atol=1e-6)
    single = np.asarray(jax.jit(oracle)(xs[1], masks[1]), np.float64)  # unbatched
    np.testing.assert_allclose(single, batched[1], atol=1e-6)


def test_answer_depends_on_x_only_through_pinned_sites():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(2), 5, 2, beta=3.0)
    mask = jnp.array([True, False, True, False, False])
    first = oracle(jnp.array([1, 0, 0, 1, 1]), mask)
    second = oracle(jnp.array([1, 1, 0, 0, 0]), mask)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(second))


def test_the_oracle_is_inconsistent():
    """Sequential sampling in two orders gives two different laws (by enumeration)."""
    n = 6
    oracle = HopfieldOracle.random(jax.random.PRNGKey(3), n, 4, beta=3.0, h=0.2)
    configs = configurations(n, 2)
    evaluate = jax.jit(jax.vmap(oracle, in_axes=(0, None)))

    def sequential_law(order):
        total = np.zeros(len(configs))
        pinned = np.zeros(n, bool)
        for site in order:
            answers = np.asarray(evaluate(jnp.asarray(configs, jnp.int32), jnp.asarray(pinned)))
            total += answers[np.arange(len(configs)), site, configs[:, site]]
            pinned[site] = True
        return np.exp(total)

    forward, backward = sequential_law(range(n)), sequential_law(reversed(range(n)))
    np.testing.assert_allclose([forward.sum(), backward.sum()], 1.0, atol=1e-5)
    assert 0.5 * np.abs(forward - backward).sum() > 0.05


def test_random_patterns():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(4), 32, 5, beta=1.0)
    again = HopfieldOracle.random(jax.random.PRNGKey(4), 32, 5, beta=1.0)
    assert oracle.patterns.shape == (5, 32)
    assert set(np.unique(oracle.patterns)) == {-1.0, 1.0}
    np.testing.assert_array_equal(oracle.patterns, again.patterns)
    assert oracle.num_positions == 32 and oracle.num_categories == 2


def test_large_instance_under_vmap():
    n, num_patterns, batch = 4096, 64, 128
    oracle = HopfieldOracle.random(jax.random.PRNGKey(5), n, num_patterns, beta=4.0)
    xs, masks = random_queries(np.random.default_rng(6), n, 2, batch)
    answers = batched_answers(oracle, xs, masks)
    assert answers.shape == (batch, n, 2)
    assert np.all(np.isfinite(answers))
    np.testing.assert_allclose(logsumexp(answers, axis=2), 0.0, atol=1e-6)


@pytest.mark.parametrize(
    ("patterns", "beta", "h", "pattern"),
    [
        (np.ones(4), 1.0, 0.0, r"^HopfieldOracle: patterns must have shape \[R, n\] .*got \(4,\)$"),
        (
            np.array([[1.0, 0.0]]),
            1.0,
            0.0,
            r"^HopfieldOracle: .*-1 and \+1, got patterns\[0, 1\] = 0\.0$",
        ),
        (np.ones((2, 3)), math.nan, 0.0, r"^HopfieldOracle: beta must be finite, got beta = nan$"),
        (np.ones((2, 3)), 1.0, math.inf, r"^HopfieldOracle: h must be finite, got h = inf$"),
    ],
)
def test_construction_errors_name_the_parameter(patterns, beta, h, pattern):
    with pytest.raises(OracleError, match=pattern):
        HopfieldOracle(patterns, beta, h)
