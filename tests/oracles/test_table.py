"""TableOracle: exact conditionals by enumeration, infilling law, joint, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import DEFECT_OK, OracleError
from numpyro_autospec.oracles import TableOracle
from numpyro_autospec.oracles._table import table_log_marginals
from numpyro_autospec.oracles._validation import log_marginals_defect
from tests.oracles.brute_force import (
    assert_rows_close,
    batched_answers,
    conditional_marginals,
    configurations,
    logsumexp,
    random_queries,
)

# The table is an argument: one compilation per shape for all the Hypothesis examples.
batched_table_log_marginals = jax.jit(jax.vmap(table_log_marginals, in_axes=(None, 0, 0)))
batched_defects = jax.jit(jax.vmap(log_marginals_defect))


def random_log_table(rng, n, q, impossible_fraction=0.0):
    log_weights = rng.normal(size=q**n) * 2.0
    log_weights[rng.random(q**n) < impossible_fraction] = -np.inf
    log_weights[rng.integers(q**n)] = 0.0  # at least one possible configuration
    return log_weights.reshape((q,) * n)


@given(
    n=st.integers(1, 4),
    q=st.integers(2, 3),
    impossible_fraction=st.sampled_from([0.0, 0.3, 0.8]),
    seed=st.integers(0, 2**31 - 1),
)
def test_conditionals_match_enumeration(n, q, impossible_fraction, seed):
    rng = np.random.default_rng(seed)
    log_table = random_log_table(rng, n, q, impossible_fraction)
    oracle = TableOracle(log_table)
    xs, masks = random_queries(rng, n, q, 6)
    answers = batched_table_log_marginals(oracle.log_probs.astype(np.float32), xs, masks)
    codes, rows = batched_defects(answers, masks)
    assert np.all(np.asarray(codes) == DEFECT_OK), (codes, rows)
    flat = log_table.reshape(-1) - logsumexp(log_table)
    for x, mask, answer in zip(xs, masks, np.asarray(answers, np.float64), strict=True):
        expected = conditional_marginals(flat, q, x, mask)
        assert not np.any(np.isnan(answer))
        assert_rows_close(answer, expected, mask, atol=1e-5)


def test_larger_table_matches_enumeration():
    rng = np.random.default_rng(7)
    log_table = random_log_table(rng, 8, 2, impossible_fraction=0.2)
    oracle = TableOracle(log_table)
    xs, masks = random_queries(rng, 8, 2, 12)
    answers = batched_answers(oracle, xs, masks)
    for x, mask, answer in zip(xs, masks, answers, strict=True):
        expected = conditional_marginals(oracle.log_probs, 2, x, mask)
        assert_rows_close(answer, expected, mask, atol=1e-5)


def test_zero_probability_prefix_gives_uniform_rows_not_nan():
    log_table = np.array([[np.log(0.5), -np.inf], [-np.inf, np.log(0.5)]])  # X_0 = X_1
    oracle = TableOracle(log_table)
    answer = np.asarray(oracle(jnp.array([0, 1]), jnp.array([True, True])))
    np.testing.assert_allclose(answer, np.full((2, 2), -np.log(2.0)), rtol=1e-6)
    possible = np.asarray(oracle(jnp.array([1, 0]), jnp.array([True, False])))
    assert possible[1].tolist() == [-np.inf, 0.0]


def test_answer_depends_on_x_only_through_pinned_sites():
    oracle = TableOracle(random_log_table(np.random.default_rng(1), 3, 3))
    mask = jnp.array([True, False, True])
    first = oracle(jnp.array([2, 0, 1]), mask)
    second = oracle(jnp.array([2, 2, 1]), mask)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(second))


def test_jit_and_vmap_agree_with_single_calls_and_the_functional_core():
    rng = np.random.default_rng(2)
    oracle = TableOracle(random_log_table(rng, 3, 3, impossible_fraction=0.3))
    xs, masks = random_queries(rng, 3, 3, 5)
    batched = batched_answers(oracle, xs, masks)
    core = batched_table_log_marginals(oracle.log_probs.astype(np.float32), xs, masks)
    np.testing.assert_array_equal(np.asarray(core, np.float64), batched)
    single = np.asarray(jax.jit(oracle)(xs[1], masks[1]), np.float64)  # unbatched
    np.testing.assert_allclose(single, batched[1], atol=1e-6)


def test_log_prob_is_the_normalized_table():
    rng = np.random.default_rng(3)
    log_table = random_log_table(rng, 3, 3, impossible_fraction=0.3)
    oracle = TableOracle(log_table)
    configs = configurations(3, 3)
    expected = log_table.reshape(-1) - logsumexp(log_table)
    np.testing.assert_allclose(np.asarray(oracle.log_prob(configs)), expected, atol=1e-5)
    np.testing.assert_allclose(oracle.log_probs.reshape(-1), expected, atol=1e-12)
    assert float(logsumexp(oracle.log_probs)) == pytest.approx(0.0, abs=1e-12)
    single = oracle.log_prob(jnp.asarray(configs[5]))
    assert single.shape == ()
    assert float(oracle.log_prob(jnp.array([0, 3, 0]))) == -np.inf


def test_conditional_log_probs_is_the_infilling_law():
    rng = np.random.default_rng(4)
    oracle = TableOracle(random_log_table(rng, 4, 2, impossible_fraction=0.2))
    configs = configurations(4, 2)
    observed = configs[int(np.argmax(oracle.log_probs.reshape(-1)))]  # a possible value
    mask = np.array([True, False, True, False])
    conditional = oracle.conditional_log_probs(observed, mask).reshape(-1)
    consistent = np.all(configs[:, mask] == observed[mask], axis=1)
    assert np.all(conditional[~consistent] == -np.inf)
    expected = oracle.log_probs.reshape(-1)[consistent]
    np.testing.assert_allclose(conditional[consistent], expected - logsumexp(expected))
    assert float(logsumexp(conditional)) == pytest.approx(0.0, abs=1e-12)
    everything = oracle.conditional_log_probs(observed, np.ones(4, bool)).reshape(-1)
    assert np.count_nonzero(np.isfinite(everything)) == 1


def test_conditional_log_probs_errors():
    oracle = TableOracle(np.array([[np.log(0.5), -np.inf], [-np.inf, np.log(0.5)]]))
    with pytest.raises(ValueError, match="probability zero"):
        oracle.conditional_log_probs(np.array([0, 1]), np.array([True, True]))
    with pytest.raises(ValueError, match="value 2 at index 0 is outside the support"):
        oracle.conditional_log_probs(np.array([2, 0]), np.array([True, False]))
    with pytest.raises(ValueError, match="bool mask of shape"):
        oracle.conditional_log_probs(np.array([0, 0]), np.array([1, 0]))


@pytest.mark.parametrize(
    ("log_table", "pattern"),
    [
        (np.zeros((2, 3)), r"^TableOracle: log_probs must have shape \(q,\)\*n, got \(2, 3\)$"),
        (np.array([0.0, np.nan]), r"^TableOracle: log_probs\[1\] is NaN$"),
        (np.array([0.0, np.inf]), r"^TableOracle: log_probs\[1\] is \+inf$"),
        (np.full((2, 2), -np.inf), r"^TableOracle: log_probs is -inf everywhere"),
    ],
)
def test_construction_errors_name_the_entry(log_table, pattern):
    with pytest.raises(OracleError, match=pattern):
        TableOracle(log_table)


def test_enumerates_a_hundred_thousand_cells_under_vmap():
    """q^n = 3^10 = 59049 cells: one batched call of 8 queries."""
    rng = np.random.default_rng(5)
    oracle = TableOracle(rng.normal(size=(3,) * 10).astype(np.float32))
    xs, masks = random_queries(rng, 10, 3, 8)
    answers = batched_answers(oracle, xs, masks)
    assert answers.shape == (8, 10, 3)
    np.testing.assert_allclose(np.exp(answers).sum(axis=-1), 1.0, atol=1e-5)
    expected = conditional_marginals(oracle.log_probs, 3, xs[3], masks[3])
    assert_rows_close(answers[3], expected, masks[3], atol=1e-4)


def test_configurations_follow_table_order():
    oracle = TableOracle(np.zeros((3, 3)))
    np.testing.assert_array_equal(oracle.configurations(), configurations(2, 3))
    assert repr(oracle) == "TableOracle(num_positions=2, num_categories=3)"


def test_traced_once_per_batch_shape():
    oracle = TableOracle(np.zeros((2, 2, 2)))
    traces = []

    def counted(x, mask):
        traces.append(None)
        return oracle(x, mask)

    batched = jax.jit(jax.vmap(counted))
    for seed in range(3):
        xs, masks = random_queries(np.random.default_rng(seed), 3, 2, 4)
        batched(jnp.asarray(xs), jnp.asarray(masks))
    assert len(traces) == 1
