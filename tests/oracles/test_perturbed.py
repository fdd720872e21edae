"""PerturbedOracle: the perturbation formula, real inconsistency, and the exact sequential law."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import DEFECT_OK, OracleError
from numpyro_autospec.oracles import PerturbedOracle, TableOracle
from numpyro_autospec.oracles._perturbed import perturbed_log_marginals
from numpyro_autospec.oracles._validation import log_marginals_defect
from tests.oracles.brute_force import (
    assert_rows_close,
    batched_answers,
    conditional_marginals,
    configurations,
    logsumexp,
    random_queries,
)

N, Q = 3, 3

# Table and noise are arguments: one compilation for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(perturbed_log_marginals, in_axes=(None, None, 0, 0)))
batched_defects = jax.jit(jax.vmap(log_marginals_defect))


def random_table(seed, n=N, q=Q, impossible_fraction=0.0):
    rng = np.random.default_rng(seed)
    log_weights = np.log(rng.dirichlet(np.full(q**n, 0.7)))
    log_weights[rng.random(q**n) < impossible_fraction] = -np.inf
    log_weights[rng.integers(q**n)] = 0.0
    return TableOracle(log_weights.reshape((q,) * n))


def oracle_sequential_log_probs(oracle, order, values=None, mask=None):
    """Direct product: call the oracle on every configuration at every step."""
    n, q = oracle.num_positions, oracle.num_categories
    mask = np.zeros(n, bool) if mask is None else mask
    values = np.zeros(n, int) if values is None else values
    configs = configurations(n, q)
    evaluate = jax.jit(jax.vmap(oracle, in_axes=(0, None)))
    total = np.zeros(len(configs))
    pinned = mask.copy()
    for site in [s for s in order if not mask[s]]:
        answers = np.asarray(evaluate(jnp.asarray(configs, jnp.int32), jnp.asarray(pinned)))
        total += answers[np.arange(len(configs)), site, configs[:, site]]
        pinned[site] = True
    observed = np.all((configs == values) | ~mask, axis=1)
    return np.where(observed, total, -np.inf).reshape((q,) * n)


@given(
    seed=st.integers(0, 2**31 - 1),
    scale=st.sampled_from([0.0, 0.3, 1.5]),
    impossible_fraction=st.sampled_from([0.0, 0.5]),
)
def test_conditionals_are_the_perturbed_table_conditionals(seed, scale, impossible_fraction):
    table = random_table(seed, impossible_fraction=impossible_fraction)
    oracle = PerturbedOracle(table, scale, jax.random.PRNGKey(seed % 1000))
    xs, masks = random_queries(np.random.default_rng(seed), N, Q, 6)
    answers = batched_core(table.log_probs.astype(np.float32), oracle.noise, xs, masks)
    codes, _ = batched_defects(answers, masks)
    assert np.all(np.asarray(codes) == DEFECT_OK)
    for x, mask, answer in zip(xs, masks, np.asarray(answers, np.float64), strict=True):
        pattern = int(np.sum(2 ** np.arange(N)[mask]))
        logits = conditional_marginals(table.log_probs, Q, x, mask) + oracle.noise[pattern]
        expected = logits - logsumexp(logits, axis=1)[:, None]
        assert_rows_close(answer, expected, mask, atol=1e-5)


def test_class_is_the_functional_core_and_scale_zero_is_the_table():
    table = random_table(0)
    oracle = PerturbedOracle(table, 0.7, jax.random.PRNGKey(1))
    xs, masks = random_queries(np.random.default_rng(2), N, Q, 6)
    batched = batched_answers(oracle, xs, masks)
    core = batched_core(table.log_probs.astype(np.float32), oracle.noise, xs, masks)
    np.testing.assert_allclose(batched, np.asarray(core, np.float64), atol=1e-6)
    unperturbed = PerturbedOracle(table, 0.0, jax.random.PRNGKey(1))
    np.testing.assert_allclose(
        batched_answers(unperturbed, xs, masks), batched_answers(table, xs, masks), atol=1e-6
    )
    assert not np.allclose(batched, batched_answers(table, xs, masks), atol=1e-2)


def test_answer_depends_on_x_only_through_pinned_sites():
    oracle = PerturbedOracle(random_table(3), 0.5, jax.random.PRNGKey(0))
    mask = jnp.array([False, True, False])
    first = oracle(jnp.array([0, 2, 1]), mask)
    second = oracle(jnp.array([2, 2, 0]), mask)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(second))


def test_the_oracle_is_really_inconsistent():
    """Two orders give different sequential laws: no joint has these conditionals."""
    oracle = PerturbedOracle(random_table(4), 0.5, jax.random.PRNGKey(5))
    laws = [np.exp(oracle.sequential_log_probs(order)) for order in ([0, 1, 2], [2, 1, 0])]
    total_variation = 0.5 * np.abs(laws[0] - laws[1]).sum()
    assert total_variation > 0.05
    # The chain rule fails already for two sites: p(x0) p(x1 | x0) != p(x1) p(x0 | x1).
    empty = np.asarray(oracle(jnp.zeros(N, jnp.int32), jnp.zeros(N, bool)), np.float64)
    x = jnp.array([1, 2, 0])
    given_0 = np.asarray(oracle(x, jnp.array([True, False, False])), np.float64)
    given_1 = np.asarray(oracle(x, jnp.array([False, True, False])), np.float64)
    assert abs((empty[0, 1] + given_0[1, 2]) - (empty[1, 2] + given_1[0, 1])) > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sequential_law_is_the_product_of_oracle_conditionals(seed):
    rng = np.random.default_rng(seed)
    oracle = PerturbedOracle(
        random_table(seed, impossible_fraction=0.3), 0.8, jax.random.PRNGKey(seed)
    )
    order = rng.permutation(N)
    expected = oracle_sequential_log_probs(oracle, order)
    law = oracle.sequential_log_probs(order)
    assert law.shape == (Q,) * N
    assert float(logsumexp(law)) == pytest.approx(0.0, abs=1e-9)
    assert_rows_close(law.reshape(1, -1), expected.reshape(1, -1), np.zeros(1, bool), atol=2e-5)


def test_sequential_law_with_observed_sites_puts_them_first():
    oracle = PerturbedOracle(random_table(6, n=4, q=2), 0.8, jax.random.PRNGKey(7))
    order = np.array([3, 1, 0, 2])
    mask = np.array([False, True, False, True])
    values = np.array([0, 1, 0, 0])
    law = oracle.sequential_log_probs(order, values, mask)
    expected = oracle_sequential_log_probs(oracle, order, values, mask)
    assert_rows_close(law.reshape(1, -1), expected.reshape(1, -1), np.zeros(1, bool), atol=2e-5)
    configs = configurations(4, 2)
    off = np.any(configs[:, mask] != values[mask], axis=1)
    assert np.all(law.reshape(-1)[off] == -np.inf)
    assert float(logsumexp(law)) == pytest.approx(0.0, abs=1e-9)
    # Observed sites first in increasing index order, whatever their place in ``order``:
    # only the relative order of the free sites matters.
    free_two_first = oracle.sequential_log_probs(np.array([1, 3, 2, 0]), values, mask)
    same_free_order = oracle.sequential_log_probs(np.array([2, 1, 0, 3]), values, mask)
    np.testing.assert_allclose(free_two_first, same_free_order)
    finite = np.isfinite(law)
    assert not np.allclose(law[finite], free_two_first[finite], atol=1e-3)  # law: 0 before 2


def test_unperturbed_sequential_law_is_the_infilling_law():
    table = random_table(8, impossible_fraction=0.3)
    oracle = PerturbedOracle(table, 0.0, jax.random.PRNGKey(0))
    configs = configurations(N, Q)
    values = configs[int(np.argmax(table.log_probs.reshape(-1)))]
    mask = np.array([False, True, False])
    np.testing.assert_allclose(
        np.exp(oracle.sequential_log_probs([2, 0, 1], values, mask)),
        np.exp(table.conditional_log_probs(values, mask)),
        atol=1e-12,
    )
    np.testing.assert_allclose(
        np.exp(oracle.sequential_log_probs([1, 2, 0])), np.exp(table.log_probs), atol=1e-12
    )


def test_sequential_law_input_errors():
    oracle = PerturbedOracle(random_table(9), 0.5, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"not a permutation of range\(3\): 0 appears 2 times"):
        oracle.sequential_log_probs([0, 0, 1])
    with pytest.raises(ValueError, match=r"value 3 at index 2 is outside the support \[0, 3\)"):
        oracle.sequential_log_probs([0, 1, 2], np.array([0, 0, 3]), np.array([False, False, True]))


def test_construction_errors_name_the_parameter():
    with pytest.raises(OracleError, match=r"^PerturbedOracle: .*n must be at most 16, got 17$"):
        PerturbedOracle(TableOracle(np.zeros((2,) * 17)), 0.5, jax.random.PRNGKey(0))
    with pytest.raises(
        OracleError, match=r"^PerturbedOracle: scale must be at least 0, got scale = -1\.0$"
    ):
        PerturbedOracle(random_table(0), -1.0, jax.random.PRNGKey(0))
    with pytest.raises(
        OracleError, match=r"^PerturbedOracle: table must be a TableOracle, got ndarray$"
    ):
        PerturbedOracle(np.zeros((3, 3)), 0.5, jax.random.PRNGKey(0))
