"""IsingChainOracle: exact conditionals, joint, site and bond statistics by enumeration; large n;
its one-call block form against the set form, and engine draws through it against the joint.

Exactness of the engine's draws through the block form: chi-square over the :math:`2^5 = 32`
configurations with 30 000 draws, 29 cells after pooling (``tests/gof.py``
``power_draws(0.012, 0.05, num_cells=29)``: 25 295 draws catch an absolute error of 0.012 in a
cell of probability 0.05 with probability 0.99), fixed seeds, pass when p > 1e-4.  The same
chi-square rejects the engine run through the same block form with a broken block
verification (every drafted site kept, ``tests/engine/broken.py``) on 2 000 draws.  A
deliberately wrong block form (one that forgets the right-hand pinned neighbour) is caught by
``check_block_form``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles import IsingChainOracle, check_block_form
from numpyro_autospec.oracles._ising_chain import (
    ising_chain_log_conditionals,
    ising_chain_log_marginals,
)
from tests.engine.broken import break_block_verification
from tests.gof import assert_gof, chisquare_gof, encode_configurations
from tests.oracles.brute_force import (
    assert_rows_close,
    batched_answers,
    conditional_marginals,
    configurations,
    ising_chain_log_joint,
    logsumexp,
    random_queries,
)
from tests.oracles.engine_draws import engine_draws

# couplings and fields are arguments: one compilation per n for all the Hypothesis examples.
batched_core = jax.jit(jax.vmap(ising_chain_log_marginals, in_axes=(None, None, 0, 0)))
batched_block = jax.jit(jax.vmap(ising_chain_log_conditionals, in_axes=(None, None, 0, 0, 0, 0)))


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


# -- the block form ---------------------------------------------------------------------------


def random_block_queries(rng, n, count, rows):
    """``count`` block queries ``(x, ranks, sites, prefix_lengths)``: random values and orders,
    ``rows`` rows each at random sites (pinned ones included) and prefix lengths in ``0..n``."""
    xs = rng.integers(0, 2, size=(count, n)).astype(np.int32)
    ranks = np.argsort(rng.random((count, n)), axis=1).astype(np.int32)
    sites = rng.integers(0, n, size=(count, rows)).astype(np.int32)
    lengths = rng.integers(0, n + 1, size=(count, rows)).astype(np.int32)
    return xs, ranks, sites, lengths


@given(
    n=st.sampled_from([1, 2, 5, 8]),
    scale=st.sampled_from([0.3, 1.0, 3.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_block_rows_equal_the_set_form_and_enumeration(n, scale, seed):
    """Row j of the block form is row sites[j] of log_marginals given ranks < prefix_lengths[j]
    (pinned rows included), and free rows match enumeration; the parameters are traced (jit
    arguments)."""
    rng = np.random.default_rng(seed)
    couplings, fields = random_chain(rng, n, scale)
    oracle = IsingChainOracle(couplings, fields)
    xs, ranks, sites, lengths = random_block_queries(rng, n, 4, 6)
    blocks = np.asarray(batched_block(oracle.couplings, oracle.fields, xs, ranks, sites, lengths))
    log_joint = ising_chain_log_joint(oracle.couplings, oracle.fields)
    for x, rank, block_sites, block_lengths, block in zip(
        xs, ranks, sites, lengths, blocks.astype(np.float64), strict=True
    ):
        masks = rank[None, :] < block_lengths[:, None]
        set_form = np.asarray(
            batched_core(oracle.couplings, oracle.fields, np.tile(x, (6, 1)), masks)
        )
        expected = set_form[np.arange(6), block_sites]
        np.testing.assert_array_equal(np.isneginf(block), np.isneginf(expected))
        np.testing.assert_allclose(np.exp(block), np.exp(expected), atol=1e-5, rtol=0)
        for row, site, mask in zip(block, block_sites, masks, strict=True):
            if not mask[site]:
                reference = conditional_marginals(log_joint, 2, x, mask)[site]
                np.testing.assert_allclose(row, reference, atol=1e-5)


def test_block_form_through_the_class_with_traced_parameters():
    """The class under jit with couplings and fields as arguments equals the functional core."""
    rng = np.random.default_rng(7)
    couplings, fields = random_chain(rng, 8)
    xs, ranks, sites, lengths = random_block_queries(rng, 8, 1, 6)

    def rows(couplings, fields, *query):
        return IsingChainOracle(couplings, fields).log_conditionals(*query)

    traced = np.asarray(jax.jit(rows)(couplings, fields, xs[0], ranks[0], sites[0], lengths[0]))
    core = np.asarray(batched_block(couplings, fields, xs, ranks, sites, lengths))[0]
    np.testing.assert_allclose(traced, core, atol=1e-6)


def test_block_form_of_a_long_chain_against_the_closed_form():
    """n = 4096, zero field, only site 0 pinned up (prefix length 1 of an order starting at
    site 0): E[s_k | s_0 = +1] = tanh(J)^k at every distance, through long runs of transfer
    matrices; with the last site pinned too, the middle of the chain is symmetric."""
    n, coupling = 4096, 0.8
    oracle = IsingChainOracle.uniform(n, coupling)
    order = np.concatenate([[0, n - 1], np.arange(1, n - 1)])
    ranks = jnp.asarray(np.argsort(order), jnp.int32)
    x = jnp.ones(n, jnp.int32).at[n - 1].set(0)
    sites = jnp.arange(1, n, dtype=jnp.int32)
    rows = np.asarray(oracle.log_conditionals(x, ranks, sites, jnp.ones(n - 1, jnp.int32)))
    magnetization = np.exp(rows[:, 1]) - np.exp(rows[:, 0])
    np.testing.assert_allclose(magnetization, np.tanh(coupling) ** np.arange(1, n), atol=1e-5)
    both = np.asarray(oracle.log_conditionals(x, ranks, sites, jnp.full(n - 1, 2, jnp.int32)))
    middle = np.exp(both[:, 1]) - np.exp(both[:, 0])  # s_0 = +1, s_{n-1} = -1: odd about n/2
    np.testing.assert_allclose(middle[: n - 2], -middle[: n - 2][::-1], atol=1e-5)
    np.testing.assert_allclose(middle[:3], np.tanh(coupling) ** np.arange(1, 4), atol=1e-5)
    assert middle[-1] == -1.0  # the pinned last site: a point mass


class ForgetsRightNeighbour(IsingChainOracle):
    """A deliberately wrong block form: each row conditions only on the pinned sites to the
    left of its site (the forward message), as if the backward message were dropped."""

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        def row(site, length):
            left_ranks = jnp.where(jnp.arange(x.shape[0]) > site, x.shape[0], ranks)
            return super(ForgetsRightNeighbour, self).log_conditionals(
                x, left_ranks, site[None], length[None]
            )[0]

        return jax.vmap(row)(sites, prefix_lengths)


def test_consistency_check_accepts_the_block_form_and_catches_a_wrong_one():
    chain = random_chain(np.random.default_rng(8), 33, scale=2.0)
    check_block_form(IsingChainOracle(*chain), atol=1e-5)
    with pytest.raises(OracleError, match="log_conditionals disagrees with log_marginals"):
        check_block_form(ForgetsRightNeighbour(*chain))


GOF_N, GOF_DRAWS = 5, 30_000


@pytest.fixture(scope="module")
def gof_draws():
    chain = IsingChainOracle(*random_chain(np.random.default_rng(9), GOF_N))
    return chain, engine_draws(chain, GOF_N, GOF_DRAWS, 10)


@pytest.mark.slow
def test_engine_draws_through_the_block_form_follow_the_joint(gof_draws):
    chain, draws = gof_draws
    assert chain.scores_blocks
    law = np.exp(ising_chain_log_joint(chain.couplings, chain.fields))
    assert_gof(encode_configurations(draws, 2), law, catches=(0.012, 0.05))  # the docstring's power


@pytest.mark.slow
def test_a_broken_verification_fails_the_same_test(gof_draws, monkeypatch):
    """A wrong sampler through the same path: the engine on the same oracle with a block
    verification that keeps every drafted site (each draft row is the site's marginal given
    the sites pinned before the window), 2 000 draws in one fresh compilation (the verifier
    is read when the engine is traced), rejected by the chi-square of
    :func:`test_engine_draws_through_the_block_form_follow_the_joint` (measured: statistic
    14 554 on 18 dof, p = 0; the right sampler on the same keys: p = 0.39)."""
    chain, _ = gof_draws
    break_block_verification(monkeypatch)
    draws = engine_draws(chain, GOF_N, 2_000, 11, chunks=1)
    law = np.exp(ising_chain_log_joint(chain.couplings, chain.fields))
    result = chisquare_gof(encode_configurations(draws, 2), law)
    assert result.p_value <= 1e-4, result
