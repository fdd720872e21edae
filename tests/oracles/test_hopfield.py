"""HopfieldOracle: the logistic formula site by site, normalization, inconsistency, large n;
its one-call block form against the set form, and engine draws through it against the law of
sequential sampling along a uniformly random order.

Exactness of the engine's draws through the block form: chi-square over the :math:`2^5 = 32`
configurations with 30 000 draws, 28 cells after pooling (``tests/gof.py``
``power_draws(0.012, 0.05, num_cells=28)``: 25 022 draws catch an absolute error of 0.012 in a
cell of probability 0.05 with probability 0.99), fixed seeds, pass when p > 1e-4.  The same
chi-square rejects the engine run through the same block form with a broken block
verification (every drafted site kept, ``tests/engine/broken.py``) on 2 000 draws.  A
deliberately wrong block form (one whose overlaps leave out the site pinned last) is caught by
``check_block_form``.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import OracleError
from numpyro_autospec.learned import random_order_law
from numpyro_autospec.oracles import FunctionOracle, HopfieldOracle, check_block_form
from numpyro_autospec.oracles._hopfield import hopfield_log_conditionals, hopfield_log_marginals
from tests.engine.broken import break_block_verification
from tests.gof import assert_gof, chisquare_gof, encode_configurations
from tests.oracles.brute_force import (
    batched_answers,
    configurations,
    logsumexp,
    random_queries,
)
from tests.oracles.engine_draws import engine_draws

N, R = 7, 3

# Patterns, beta and h are arguments: one compilation for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(hopfield_log_marginals, in_axes=(None, None, None, 0, 0)))
batched_block = jax.jit(jax.vmap(hopfield_log_conditionals, in_axes=(None, None, None, 0, 0, 0, 0)))


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


# -- the block form ---------------------------------------------------------------------------


@given(
    n=st.sampled_from([1, N]),
    seed=st.integers(0, 2**31 - 1),
    beta=st.floats(0.0, 5.0),
    h=st.floats(-2.0, 2.0),
)
def test_block_rows_equal_the_set_form(n, seed, beta, h):
    """Row j of the block form is row sites[j] of log_marginals given ranks < prefix_lengths[j]
    (pinned rows included: the same formula), with patterns, beta and h traced (jit
    arguments)."""
    rng = np.random.default_rng(seed)
    patterns = rng.choice([-1.0, 1.0], size=(R, n))
    count, rows = 4, 6
    xs = rng.integers(0, 2, size=(count, n)).astype(np.int32)
    ranks = np.argsort(rng.random((count, n)), axis=1).astype(np.int32)
    sites = rng.integers(0, n, size=(count, rows)).astype(np.int32)
    lengths = rng.integers(0, n + 1, size=(count, rows)).astype(np.int32)
    blocks = np.asarray(batched_block(patterns, beta, h, xs, ranks, sites, lengths))
    for x, rank, block_sites, block_lengths, block in zip(
        xs, ranks, sites, lengths, blocks, strict=True
    ):
        masks = rank[None, :] < block_lengths[:, None]
        set_form = np.asarray(batched_core(patterns, beta, h, np.tile(x, (rows, 1)), masks))
        np.testing.assert_allclose(block, set_form[np.arange(rows), block_sites], atol=1e-6)


class MissesTheLastPinnedSite(HopfieldOracle):
    """A deliberately wrong block form, off by one in the cumulative sum: row j's overlaps
    leave out the site pinned last (rank ``prefix_lengths[j] - 1``)."""

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        shorter = jnp.maximum(prefix_lengths - 1, 0)
        return hopfield_log_conditionals(self.patterns, self.beta, self.h, x, ranks, sites, shorter)


def test_consistency_check_accepts_the_block_form_and_catches_a_wrong_one():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(6), 64, 8, beta=2.0, h=0.1)
    check_block_form(oracle, atol=1e-6)
    wrong = MissesTheLastPinnedSite(oracle.patterns, 2.0, 0.1)
    with pytest.raises(OracleError, match="log_conditionals disagrees with log_marginals"):
        check_block_form(wrong)


GOF_N, GOF_DRAWS = 5, 30_000


@pytest.fixture(scope="module")
def gof_oracle():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(8), GOF_N, 3, beta=3.0, h=0.2)
    set_form = FunctionOracle(oracle.log_marginals, GOF_N, 2)  # block form derived from it
    draws = engine_draws(oracle, GOF_N, GOF_DRAWS, 9)
    return oracle, draws, random_order_law(set_form).ravel()


@pytest.mark.slow
def test_engine_draws_through_the_block_form_follow_the_random_order_law(gof_oracle):
    """The law is enumerated from the set form (``log_marginals``), not the block form."""
    oracle, draws, law = gof_oracle
    assert oracle.scores_blocks
    assert_gof(encode_configurations(draws, 2), law, catches=(0.012, 0.05))  # the docstring's power


@pytest.mark.slow
def test_a_broken_verification_fails_the_same_test(gof_oracle, monkeypatch):
    """A wrong sampler through the same path: the engine on the same oracle with a block
    verification that keeps every drafted site, 2 000 draws in one fresh compilation (the
    verifier is read when the engine is traced), rejected by the chi-square of
    :func:`test_engine_draws_through_the_block_form_follow_the_random_order_law` (measured:
    statistic 39 814 on 11 dof, p = 0; the right sampler on the same keys: p = 0.93)."""
    oracle, _, law = gof_oracle
    break_block_verification(monkeypatch)
    draws = engine_draws(oracle, GOF_N, 2_000, 11, chunks=1)
    result = chisquare_gof(encode_configurations(draws, 2), law)
    assert result.p_value <= 1e-4, result
