"""CurieWeissOracle: exact conditionals and magnetization laws by enumeration; large n in O(n)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.oracles._curie_weiss import (
    curie_weiss_log_conditionals,
    curie_weiss_log_marginals,
)
from tests.oracles.brute_force import (
    assert_rows_close,
    batched_answers,
    conditional_marginals,
    configurations,
    curie_weiss_log_joint,
    logsumexp,
    random_queries,
)

# beta and h are arguments: one compilation per n for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(curie_weiss_log_marginals, in_axes=(None, None, 0, 0)))


@given(
    n=st.sampled_from([1, 2, 5, 8]),
    beta=st.floats(0.0, 3.0),
    h=st.floats(-1.0, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_conditionals_match_enumeration(n, beta, h, seed):
    rng = np.random.default_rng(seed)
    xs, masks = random_queries(rng, n, 2, 8)
    answers = np.asarray(batched_core(beta, h, xs, masks), np.float64)
    log_joint = curie_weiss_log_joint(n, beta, h)
    for x, mask, answer in zip(xs, masks, answers, strict=True):
        expected = conditional_marginals(log_joint, 2, x, mask)
        assert_rows_close(answer, expected, mask, atol=2e-6)
        np.testing.assert_allclose(logsumexp(answer, axis=1), 0.0, atol=1e-6)


# the block form with beta and h arguments: one compilation per n for all the Hypothesis examples
block_core = jax.jit(curie_weiss_log_conditionals)


@given(
    n=st.sampled_from([1, 2, 7, 33]),
    beta=st.one_of(st.floats(-3.0, 3.0), st.floats(15.0, 40.0), st.floats(-40.0, -15.0)),
    h=st.floats(-2.0, 2.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_block_rows_equal_the_set_form(n, beta, h, seed):
    """Row j of ``log_conditionals`` is ``log_marginals`` given the sites of rank below
    ``prefix_lengths[j]``, in the disordered and the strongly ordered regimes."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, n).astype(np.int32)
    ranks = rng.permutation(n).astype(np.int32)
    prefix_lengths = rng.integers(0, n + 1, 9).astype(np.int32)
    sites = rng.integers(0, n, 9).astype(np.int32)
    rows = np.asarray(block_core(beta, h, x, ranks, sites, prefix_lengths), np.float64)
    for row, site, length in zip(rows, sites, prefix_lengths, strict=True):
        expected = curie_weiss_log_marginals(beta, h, x, ranks < length)[site]
        np.testing.assert_allclose(np.exp(row), np.exp(np.asarray(expected)), atol=1e-5)


@pytest.mark.parametrize("beta, h", [(1.0, 0.0), (3.0, -0.2), (-2.0, 0.1), (20.0, 1.0)])
def test_block_rows_of_four_thousand_sites_against_float64(beta, h):
    """A block of 600 rows at n = 4096 (several chunks) against the sums in float64."""
    from scipy.special import gammaln as log_gamma

    n = 4096
    rng = np.random.default_rng(7)
    x = (rng.random(n) < 0.6).astype(np.int32)
    ranks = rng.permutation(n).astype(np.int32)
    prefix_lengths = np.sort(rng.integers(0, n + 1, 600)).astype(np.int32)
    rows = block_core(beta, h, x, ranks, ranks[:600], prefix_lengths)
    spin_sums = np.concatenate([[0], np.cumsum(2 * x[np.argsort(ranks)] - 1)])
    for row, length in zip(np.exp(np.asarray(rows, np.float64)), prefix_lengths, strict=True):
        others = max(n - 1 - length, 0)
        ups = np.arange(others + 1)
        rest = spin_sums[length] + 2 * ups - others
        log_binomials = log_gamma(others + 1) - log_gamma(ups + 1) - log_gamma(others - ups + 1)
        logs = np.array(
            [
                logsumexp(log_binomials + beta / (2 * n) * (rest + s) ** 2 + h * (rest + s))
                for s in (-1, 1)
            ]
        )
        np.testing.assert_allclose(row, np.exp(logs - logsumexp(logs)), atol=2e-5)


def test_class_is_the_functional_core_under_jit_and_vmap():
    oracle = CurieWeissOracle(6, beta=1.2, h=0.1)
    xs, masks = random_queries(np.random.default_rng(0), 6, 2, 5)
    batched = batched_answers(oracle, xs, masks)
    core = np.asarray(batched_core(1.2, 0.1, xs, masks), np.float64)
    np.testing.assert_allclose(batched, core, atol=1e-6)
    single = np.asarray(jax.jit(oracle)(xs[1], masks[1]), np.float64)  # unbatched
    np.testing.assert_allclose(single, batched[1], atol=1e-6)


def test_magnetization_law_matches_enumeration():
    n, beta, h = 7, 1.3, -0.2
    oracle = CurieWeissOracle(n, beta, h)
    log_joint = curie_weiss_log_joint(n, beta, h)
    ups = configurations(n, 2).sum(axis=1)
    expected = np.array([logsumexp(log_joint[ups == k]) for k in range(n + 1)])
    np.testing.assert_allclose(oracle.magnetization_log_probs(), expected, atol=1e-12)


def test_conditional_magnetization_law_matches_enumeration():
    n, beta, h = 8, 0.9, 0.3
    oracle = CurieWeissOracle(n, beta, h)
    configs = configurations(n, 2)
    log_joint = curie_weiss_log_joint(n, beta, h)
    mask = np.array([True, False, False, True, True, False, False, False])
    values = np.array([1, 0, 0, 0, 1, 0, 0, 0])
    consistent = np.all(configs[:, mask] == values[mask], axis=1)
    free_ups = configs[:, ~mask].sum(axis=1)
    weights = np.where(consistent, log_joint, -np.inf)
    expected = np.array([logsumexp(weights[free_ups == k]) for k in range(6)])
    expected -= logsumexp(expected)
    law = oracle.magnetization_log_probs_given(values, mask)
    assert law.shape == (6,)  # 0..5 up spins among the 5 free sites
    np.testing.assert_allclose(law, expected, atol=1e-12)


def test_log_prob_matches_enumeration():
    n, beta, h = 6, 1.7, 0.4
    oracle = CurieWeissOracle(n, beta, h)
    configs = configurations(n, 2)
    np.testing.assert_allclose(
        np.asarray(oracle.log_prob(configs)), curie_weiss_log_joint(n, beta, h), atol=1e-5
    )


def reference_probability_up(n, beta, h, x, mask, site):
    """float64 P(x_site = 1 | x_mask), summing over the up-spins among the other free sites."""
    others = n - int(mask.sum()) - (0 if mask[site] else 1)
    pinned_sum = int(np.sum(2 * x[mask] - 1))
    ups = np.arange(others + 1)
    log_binomial = np.array(
        [math.lgamma(others + 1) - math.lgamma(j + 1) - math.lgamma(others - j + 1) for j in ups]
    )
    rest = pinned_sum + 2.0 * ups - others
    log_mass = [
        logsumexp(log_binomial + beta / (2 * n) * (rest + s) ** 2 + h * (rest + s)) for s in (-1, 1)
    ]
    return float(np.exp(log_mass[1] - np.logaddexp(*log_mass)))


@pytest.mark.parametrize(("beta", "h"), [(1.0, 0.0), (3.0, 0.01)])
def test_sixteen_thousand_sites_under_vmap(beta, h):
    """n = 16384, 256 queries in one batch: O(n) per query; float32 probabilities accurate to
    ~1e-5 against a float64 reference, in the ordered phase too."""
    n, batch = 16384, 256
    rng = np.random.default_rng(11)
    xs, masks = random_queries(rng, n, 2, batch)
    oracle = CurieWeissOracle(n, beta, h)
    answers = jax.jit(jax.vmap(oracle))(jnp.asarray(xs), jnp.asarray(masks))
    assert answers.shape == (batch, n, 2)
    answers = np.asarray(answers[:, 0, :], np.float64)  # all rows of a query are equal
    assert np.all(np.isfinite(answers))
    np.testing.assert_allclose(logsumexp(answers, axis=1), 0.0, atol=1e-6)
    for query in [0, 1, 2, 100]:
        site = int(np.flatnonzero(~masks[query])[0])
        expected = reference_probability_up(n, beta, h, xs[query], masks[query], site)
        assert np.exp(answers[query, 1]) == pytest.approx(expected, abs=5e-5)


def test_pinned_rows_equal_the_free_row():
    oracle = CurieWeissOracle(5, beta=2.0, h=0.5)
    answer = np.asarray(
        oracle(jnp.array([1, 0, 1, 1, 0]), jnp.array([True, True, False, False, False]))
    )
    assert np.all(answer == answer[2])


def test_magnetization_law_given_input_checks():
    oracle = CurieWeissOracle(3, beta=1.0)
    with pytest.raises(ValueError, match="value 2 at index 1 is outside the support"):
        oracle.magnetization_log_probs_given(np.array([0, 2, 0]), np.array([False, True, False]))
    with pytest.raises(ValueError, match=r"bool mask of shape \(3,\)"):
        oracle.magnetization_log_probs_given(np.zeros(3, int), np.zeros(2, bool))


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((0, 1.0), r"^CurieWeissOracle: num_positions must be a positive integer, got 0$"),
        ((2.5, 1.0), r"^CurieWeissOracle: num_positions must be a positive integer, got 2\.5$"),
        ((4, math.inf), r"^CurieWeissOracle: beta must be finite, got beta = inf$"),
        ((4, 1.0, math.nan), r"^CurieWeissOracle: h must be finite, got h = nan$"),
        ((4, [1.0, 2.0]), r"^CurieWeissOracle: beta must have shape \(\), got \(2,\)$"),
    ],
)
def test_construction_errors_name_the_parameter(args, pattern):
    with pytest.raises(OracleError, match=pattern):
        CurieWeissOracle(*args)
