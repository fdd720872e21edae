"""IsingChainOracle: exact conditionals, joint, site and bond statistics by enumeration; large n."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.oracles import IsingChainOracle, OracleError, ising_chain_log_marginals
from tests.oracles.brute_force import (
    assert_rows_close,
    batched_answers,
    conditional_marginals,
    configurations,
    ising_chain_log_joint,
    logsumexp,
    random_queries,
)

# couplings and fields are arguments: one compilation per n for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(ising_chain_log_marginals, in_axes=(None, None, 0, 0)))


def random_chain(rng, n, scale=1.0):
    return rng.normal(size=n - 1) * scale, rng.normal(size=n) * scale


@given(
    n=st.sampled_from([1, 2, 5, 8]),
    scale=st.sampled_from([0.3, 1.0, 3.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_conditionals_match_enumeration(n, scale, seed):
    rng = np.random.default_rng(seed)
    couplings, fields = random_chain(rng, n, scale)
    oracle = IsingChainOracle(couplings, fields)
    xs, masks = random_queries(rng, n, 2, 8)
    answers = batched_core(oracle.couplings, oracle.fields, xs, masks)
    log_joint = ising_chain_log_joint(oracle.couplings, oracle.fields)
    for x, mask, answer in zip(xs, masks, np.asarray(answers, np.float64), strict=True):
        expected = conditional_marginals(log_joint, 2, x, mask)
        assert_rows_close(answer, expected, mask, atol=1e-5)
        np.testing.assert_allclose(logsumexp(answer, axis=1), 0.0, atol=1e-6)


def test_class_is_the_functional_core_under_jit_and_vmap():
    oracle = IsingChainOracle(*random_chain(np.random.default_rng(0), 6))
    xs, masks = random_queries(np.random.default_rng(1), 6, 2, 5)
    batched = batched_answers(oracle, xs, masks)
    core = batched_core(oracle.couplings, oracle.fields, xs, masks)
    np.testing.assert_allclose(batched, np.asarray(core, np.float64), atol=1e-6)
    single = np.asarray(jax.jit(oracle)(xs[1], masks[1]), np.float64)  # unbatched
    np.testing.assert_allclose(single, batched[1], atol=1e-6)


def test_joint_site_marginals_and_bond_expectations_match_enumeration():
    oracle = IsingChainOracle(*random_chain(np.random.default_rng(2), 7))
    log_joint = ising_chain_log_joint(oracle.couplings, oracle.fields)
    configs = configurations(7, 2)
    probs = np.exp(log_joint)
    spins = 2.0 * configs - 1.0
    np.testing.assert_allclose(np.asarray(oracle.log_prob(configs)), log_joint, atol=1e-5)
    assert float(oracle.log_partition()) == pytest.approx(
        float(logsumexp(spins @ oracle.fields + (spins[:, :-1] * spins[:, 1:]) @ oracle.couplings)),
        abs=1e-5,
    )
    up_marginals = probs @ configs
    np.testing.assert_allclose(oracle.site_marginals()[:, 1], up_marginals, atol=1e-6)
    np.testing.assert_allclose(oracle.site_marginals().sum(axis=1), 1.0, atol=1e-6)
    bonds = probs @ (spins[:, :-1] * spins[:, 1:])
    np.testing.assert_allclose(oracle.bond_expectations(), bonds, atol=1e-6)


def test_long_chain_against_closed_forms():
    """Zero field, open chain: E[s_i s_{i+1}] = tanh J, and E[s_k | s_0 = +1] = tanh(J)^k."""
    n, coupling = 8192, 0.8
    oracle = IsingChainOracle.uniform(n, coupling)
    np.testing.assert_allclose(oracle.bond_expectations(), np.tanh(coupling), atol=1e-5)
    np.testing.assert_allclose(oracle.site_marginals(), 0.5, atol=1e-5)
    mask = np.zeros(n, bool)
    mask[0] = True
    answer = np.asarray(oracle(jnp.ones(n, jnp.int32), jnp.asarray(mask)), np.float64)
    magnetization = np.exp(answer[1:, 1]) - np.exp(answer[1:, 0])
    np.testing.assert_allclose(magnetization, np.tanh(coupling) ** np.arange(1, n), atol=1e-5)


def test_long_chain_batched_queries_are_normalized():
    n, batch = 4096, 64
    oracle = IsingChainOracle(*random_chain(np.random.default_rng(3), n))
    xs, masks = random_queries(np.random.default_rng(4), n, 2, batch)
    answers = batched_answers(oracle, xs, masks)
    assert answers.shape == (batch, n, 2)
    assert not np.any(np.isnan(answers))
    assert np.all(np.isfinite(answers[~masks]))  # pinned rows are -inf off the pinned value
    np.testing.assert_allclose(logsumexp(answers, axis=2), 0.0, atol=1e-5)


def test_pinned_neighbours_screen_off_the_rest():
    """Markov property: with both neighbours pinned, a site ignores every other value."""
    oracle = IsingChainOracle(*random_chain(np.random.default_rng(5), 6))
    mask = jnp.array([True, False, True, True, True, False])
    first = oracle(jnp.array([0, 0, 1, 0, 1, 0]), mask)
    second = oracle(jnp.array([1, 1, 1, 0, 1, 1]), mask)
    np.testing.assert_allclose(np.asarray(first[3]), np.asarray(second[3]), atol=1e-6)
    assert not np.allclose(np.asarray(first[1]), np.asarray(second[1]), atol=1e-3)


def test_single_site_chain():
    oracle = IsingChainOracle([], [0.5])
    answer = np.asarray(oracle(jnp.zeros(1, jnp.int32), jnp.zeros(1, bool)), np.float64)
    np.testing.assert_allclose(np.exp(answer[0]), [1 / (1 + np.e), 1 / (1 + np.exp(-1.0))])
    assert oracle.bond_expectations().shape == (0,)


def test_uniform_constructor():
    oracle = IsingChainOracle.uniform(4, coupling=0.3, field=-0.1)
    assert oracle.num_positions == 4 and oracle.num_categories == 2
    np.testing.assert_array_equal(oracle.couplings, np.full(3, 0.3, np.float32))
    np.testing.assert_array_equal(oracle.fields, np.full(4, -0.1, np.float32))


@pytest.mark.parametrize(
    ("couplings", "fields", "pattern"),
    [
        (
            np.zeros(3),
            np.zeros(3),
            r"^IsingChainOracle: couplings must have shape \(2,\), got \(3,\)$",
        ),
        (np.zeros(0), np.zeros(0), r"^IsingChainOracle: fields must have shape \(n,\) with n >= 1"),
        (
            np.zeros(2),
            np.array([0.0, np.inf, 0.0]),
            r"^IsingChainOracle: fields must be finite, got fields\[1\] = inf$",
        ),
    ],
)
def test_construction_errors_name_the_parameter_and_entry(couplings, fields, pattern):
    with pytest.raises(OracleError, match=pattern):
        IsingChainOracle(couplings, fields)
