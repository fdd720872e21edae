"""The round scheduler: the reference's draws, key for key, for every method (``COMPARED``
keys each) and with a starved pool; exact laws by goodness-of-fit (p > 1e-4, fixed seeds); a
broken piece of each path is caught.

Because every random decision is derived from the root key exactly as in the reference
sampler, the engine's draws are compared with the reference's *draw for draw*, which is much
stronger than a law-level comparison; the goodness-of-fit tests then check the law itself at
draw counts the slow reference cannot afford.
"""

import jax
import numpy as np
import pytest
from scipy import stats

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.oracles import (
    CurieWeissOracle,
    IsingChainOracle,
    PerturbedOracle,
)
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.broken import (
    break_block_verification,
    break_residual_trials,
    break_target_steps,
    break_token_verification,
)
from tests.engine.programs import compiled_run, draws_in_calls
from tests.gof import assert_gof, chisquare_gof, encode_configurations, mean_z_test
from tests.tables import probabilities_of, random_table

N, Q = 4, 3
CONFIGS = {
    "autospec": SamplerConfig(),
    # windows that keep fewer than 4 steps are followed by a recursion block of 3 steps
    "autospec-fallback": SamplerConfig(window=2, min_window=1, floor=4, fallback=3),
    "autospec-adaptive": SamplerConfig(window=1, min_window=1, window_growth=2, floor=2),
    "paper": SamplerConfig(root_windows=False),
    "paper-block2": SamplerConfig(root_windows=False, block_size=2, growth=0.5),
    "assd": SamplerConfig(method="assd", block_size=3),
    "block": SamplerConfig(method="block", block_size=4),
    "sequential": SamplerConfig(method="sequential"),
}
STARVED = Capacity(num_slots=2, max_queries=1, max_transitions=1)
#: keys per engine call: the runs of one config and capacity share one compiled program, and
#: the default capacity holds every task of its draws (6 slots a draw for the paper's root at
#: n = 4, 2 for the others, at most 8192: ``engine._plan.plan``), so that every draw takes the
#: reference's rounds (at 5000 keys the paper's draws would wait for slots)
CHUNK = 500
#: keys per call for the larger models (Curie-Weiss n = 32, Ising n = 48): their pools hold
#: 100 draws, so that their slots' states stay small
LARGE_MODEL_CHUNK = 100
#: keys per call in a starved pool: its single query per round serves one draw of the call at a
#: time, so a call's passes follow its draws whatever their number, and each pass costs the
#: pool's size (2 000 draws: 6.5 s in calls of 500 keys, 1.5 s in calls of 25)
STARVED_CHUNK = 25
#: keys compared with the reference per config: one call of the shared program; a reference
#: that differed on 1% of the keys would be caught with probability 0.993 (the reference's own
#: law rests on this equality and the engine's goodness-of-fit, tests/test_reference.py)
COMPARED = CHUNK


def engine_draws(process, key, num_draws, config, capacity=None, chunk=CHUNK, share=True):
    """``num_draws`` draws of the keys ``jax.random.split(key, num_draws)``
    (:func:`draws_of_keys`)."""
    keys = jax.random.split(key, num_draws)
    return draws_of_keys(process, keys, config, capacity, chunk, share)


def draws_of_keys(process, keys, config, capacity=None, chunk=CHUNK, share=True):
    """One draw per key, in calls of ``chunk`` keys each (:func:`draws_in_calls`), so that
    every call of one shape, config and capacity runs one compiled program whatever the
    number of keys: the comparisons with the reference share the goodness-of-fit
    runs' compilations.  A process without observed sites or a fixed order runs through
    :func:`compiled_run` (``share=False``: a compilation of its own, for a monkeypatched
    engine), any other through a compilation of its own."""
    if share and process.num_observed == 0 and process.order is None:
        compiled = compiled_run(process.num_positions, process.num_categories, config, capacity)

        def fn(keys):
            return compiled(process.oracle, keys)

    else:
        fn = jax.jit(lambda keys: run(process, keys, config, capacity))
    samples = draws_in_calls(fn, keys, chunk)
    return samples.value, samples.rounds, samples.queries


def table_cells(table_seed, key, num_draws, config, capacity=None, chunk=CHUNK, share=True):
    """:func:`engine_draws` of ``random_table(table_seed)``, coded as cells of its ``Q**N``
    (:func:`~tests.gof.encode_configurations`), and the table's exact law."""
    oracle = random_table(table_seed)
    process = AnyOrderProcess(oracle, N, Q)
    value, _, _ = engine_draws(process, key, num_draws, config, capacity, chunk, share)
    return encode_configurations(value, Q), probabilities_of(oracle.log_probs)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_draws_equal_the_reference(name):
    config = CONFIGS[name]
    process = AnyOrderProcess(random_table(0), N, Q)
    key = jax.random.PRNGKey(11)
    value, rounds, queries = engine_draws(process, key, COMPARED, config)
    ref_value, ref_rounds, ref_queries = reference.sample_many(process, key, COMPARED, config)
    np.testing.assert_array_equal(value, ref_value)
    np.testing.assert_array_equal(rounds, ref_rounds)  # ample capacity: same parallel time
    assert np.all(queries <= ref_queries)  # the engine cancels losing trials


@pytest.mark.parametrize("name", ["autospec-fallback", "paper", "assd", "block"])
def test_capacities_do_not_change_draws(name):
    config = CONFIGS[name]
    process = AnyOrderProcess(random_table(1), N, Q)
    key = jax.random.PRNGKey(12)
    # the ample run shares test_draws_equal_the_reference's compilation, the starved one
    # test_exact_with_a_starved_pool's (autospec-fallback)
    ample, ample_rounds, _ = engine_draws(process, key, 60, config)
    starved, starved_rounds, _ = engine_draws(process, key, 60, config, STARVED, STARVED_CHUNK)
    np.testing.assert_array_equal(starved, ample)
    assert starved_rounds.mean() >= ample_rounds.mean()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_exact_on_random_table(name):
    """40 000 draws, chi-square over the 81 cells (78 after pooling): an absolute error of 0.012
    in a cell of probability 0.05 is caught at power 0.99 (``power_draws(0.012, 0.05,
    num_cells=78)``: 35 267 draws)."""
    # the paper's root: calls of 5000 keys (8192 slots, a compilation of their own) take 21 s
    # here, calls of CHUNK keys (3000 slots each) 120 s
    chunk = 5000 if name.startswith("paper") else CHUNK
    codes, law = table_cells(2, jax.random.PRNGKey(13), 40_000, CONFIGS[name], chunk=chunk)
    assert_gof(codes, law, threshold=1e-4, catches=(0.012, 0.05))


@pytest.mark.slow
def test_exact_with_a_starved_pool():
    """20 000 draws, chi-square over the 81 cells (76 after pooling): an absolute error of
    0.016 in a cell of probability 0.05 is caught at power 0.99 (``power_draws(0.016, 0.05,
    num_cells=76)``: 19 654 draws)."""
    codes, law = table_cells(
        3, jax.random.PRNGKey(14), 20_000, CONFIGS["autospec-fallback"], STARVED, STARVED_CHUNK
    )
    assert_gof(codes, law, threshold=1e-4, catches=(0.016, 0.05))


@pytest.mark.slow
def test_wrong_sampler_with_a_starved_pool_is_caught(monkeypatch):
    """The chi-square of :func:`test_exact_with_a_starved_pool` rejects the same starved run
    with its block verification keeping every drafted site, 2 000 draws in a compilation of
    their own (measured: statistic 2 080 on 59 dof, p = 0; the right sampler on the same keys
    and pool: p = 0.48)."""
    break_block_verification(monkeypatch)
    codes, law = table_cells(
        3,
        jax.random.PRNGKey(14),
        2_000,
        CONFIGS["autospec-fallback"],
        STARVED,
        STARVED_CHUNK,
        share=False,
    )
    result = chisquare_gof(codes, law)
    assert result.p_value <= 1e-4, result


#: an inconsistent oracle (its conditionals are no joint's) with a fixed order and one observed
#: site: the law is prod_k p(x_sigma(k) | x_sigma(<k), observed), not mu's conditional
ORDER = np.array([3, 1, 0, 2])
MASK = np.array([False, True, False, False])
OBSERVED = np.array([0, 2, 0, 0])
INCONSISTENT = PerturbedOracle(random_table(4), 0.5, jax.random.PRNGKey(5))
INFILLING = AnyOrderProcess(
    INCONSISTENT, N, Q, observed_values=OBSERVED, observed_mask=MASK, order=ORDER
)


@pytest.mark.parametrize("name", ["autospec-fallback", "paper"])
def test_draws_equal_the_reference_with_a_fixed_order_and_infilling(name):
    """The process of :func:`test_exact_for_inconsistent_oracle_and_infilling` (its compiled
    program: calls of ``CHUNK`` keys), ``COMPARED`` draws key for key against the reference."""
    key = jax.random.PRNGKey(15)
    value, rounds, queries = engine_draws(INFILLING, key, COMPARED, CONFIGS[name])
    ref_value, ref_rounds, ref_queries = reference.sample_many(
        INFILLING, key, COMPARED, CONFIGS[name]
    )
    np.testing.assert_array_equal(value, ref_value)
    np.testing.assert_array_equal(rounds, ref_rounds)
    assert np.all(queries <= ref_queries)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["autospec-fallback", "paper"])
def test_exact_for_inconsistent_oracle_and_infilling(name):
    """40 000 draws, chi-square over the 27 cells of the free sites (fewer after pooling, which
    only raises the power): an absolute error of 0.010 in a cell of probability 0.05 is caught
    at power 0.99 (``power_draws(0.010, 0.05, num_cells=27)``: 35 629 draws)."""
    value, _, _ = engine_draws(INFILLING, jax.random.PRNGKey(15), 40_000, CONFIGS[name])
    assert (value[:, 1] == 2).all()
    expected = probabilities_of(INCONSISTENT.sequential_log_probs(ORDER, OBSERVED, MASK))
    assert_gof(encode_configurations(value, Q), expected, threshold=1e-4, catches=(0.010, 0.05))


#: a broken piece of each infilling law's path (traced into a compilation of its own) and the
#: draws that reject it (measured p on the same keys, the right sampler's in parentheses): the
#: fallback's block verification keeping every drafted site, 4 000 draws: statistic 723 on 25
#: dof, p = 2.4e-136 (0.018); the paper's residual trials accepted unconditionally, 1 000
#: draws: statistic 155 on 21 dof, p = 1.6e-22 (0.36)
BROKEN_INFILLING = {
    "autospec-fallback": (
        break_block_verification,
        4_000,
    ),
    "paper": (
        break_residual_trials,
        1_000,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BROKEN_INFILLING))
def test_wrong_sampler_with_infilling_is_caught(monkeypatch, name):
    """The chi-square of :func:`test_exact_for_inconsistent_oracle_and_infilling` rejects the
    same process and config with one broken piece (:data:`BROKEN_INFILLING`), in a
    compilation of its own."""
    breaks, num_draws = BROKEN_INFILLING[name]
    breaks(monkeypatch)
    value, _, _ = engine_draws(
        INFILLING, jax.random.PRNGKey(15), num_draws, CONFIGS[name], share=False
    )
    expected = probabilities_of(INCONSISTENT.sequential_log_probs(ORDER, OBSERVED, MASK))
    result = chisquare_gof(encode_configurations(value, Q), expected)
    assert result.p_value <= 1e-4, result


#: the Curie-Weiss model of the magnetization tests
MAGNETIZATION_N = 32
MAGNETIZATION_ORACLE = CurieWeissOracle(MAGNETIZATION_N, beta=1.2)


def magnetization_draws(num_draws, share=True):
    """``num_draws`` draws of :data:`MAGNETIZATION_ORACLE` with the default sampler: the up
    spins of each draw, and the rounds."""
    value, rounds, _ = engine_draws(
        AnyOrderProcess(MAGNETIZATION_ORACLE, MAGNETIZATION_N, 2),
        jax.random.PRNGKey(16),
        num_draws,
        SamplerConfig(),
        chunk=LARGE_MODEL_CHUNK,
        share=share,
    )
    return value.sum(axis=1), rounds


def test_curie_weiss_magnetization_law():
    """6 000 draws, chi-square over the 33 values of the number of up spins (none pooled): an
    absolute error of 0.026 in a cell of probability 0.05 (about the largest) is caught at
    power 0.99 (``power_draws(0.026, 0.05, num_cells=33)``: 5 612 draws)."""
    ups, rounds = magnetization_draws(6_000)
    law = np.exp(MAGNETIZATION_ORACLE.magnetization_log_probs())
    assert_gof(ups, law, threshold=1e-4, catches=(0.026, 0.05))
    assert rounds.mean() < MAGNETIZATION_N / 2


def test_wrong_sampler_fails_the_magnetization_law(monkeypatch):
    """The chi-square of :func:`test_curie_weiss_magnetization_law` rejects the default root
    with its block verification keeping every drafted site, 1 000 draws in a compilation of
    their own (measured: statistic 2 991 on 32 dof, p = 0; the right sampler on the same keys:
    p = 0.60)."""
    break_block_verification(monkeypatch)
    ups, _ = magnetization_draws(1_000, share=False)
    result = chisquare_gof(ups, np.exp(MAGNETIZATION_ORACLE.magnetization_log_probs()))
    assert result.p_value <= 1e-4, result


def domain_wall_law(n, coupling):
    """Zero field: the bonds are independent, the number of domain walls
    Binomial(n - 1, 1 / (1 + e^{2J}))."""
    return stats.binom.pmf(np.arange(n), n - 1, 1.0 / (1.0 + np.exp(2.0 * coupling)))


def test_wrong_sampler_fails_the_ising_chain_laws(monkeypatch):
    """The two checks of :func:`test_ising_chain_statistics` reject the default root with its
    block verification keeping every drafted site, 1 000 draws of each chain in one
    compilation of their own (the chain an argument): the domain-wall chi-square (measured:
    statistic 51 586 on 13 dof, p = 0; the right sampler on the same keys: p = 0.22) and the
    z-tests of the random-field chain's spin and bond means."""
    break_block_verification(monkeypatch)
    n, coupling = 48, 0.8
    draw = jax.jit(lambda chain, keys: run(AnyOrderProcess(chain, n, 2), keys, SamplerConfig()))
    keys = jax.random.split(jax.random.PRNGKey(21), 1_000)
    value = np.asarray(draw(IsingChainOracle.uniform(n, coupling), keys).value)
    walls = (value[:, 1:] != value[:, :-1]).sum(axis=1)
    result = chisquare_gof(walls, domain_wall_law(n, coupling))
    assert result.p_value <= 1e-4, result

    chain = random_field_chain(n)
    value = np.asarray(draw(chain, jax.random.split(jax.random.PRNGKey(22), 1_000)).value)
    statistics, expected = spin_and_bond_means(chain, value)
    with pytest.raises(AssertionError, match="z-test"):
        mean_z_test(statistics, expected, threshold=1e-4)


def random_field_chain(n):
    """The random couplings and fields of :func:`test_ising_chain_statistics`."""
    rng = np.random.default_rng(3)
    return IsingChainOracle(rng.uniform(-1.0, 1.2, n - 1), rng.normal(0.0, 0.5, n))


def spin_and_bond_means(chain, value):
    """Every spin and every bond of the draws, and their transfer-matrix expectations."""
    spins = 2.0 * value - 1.0
    statistics = np.concatenate([spins, spins[:, 1:] * spins[:, :-1]], axis=1)
    expected = np.concatenate(
        [chain.site_marginals() @ np.array([-1.0, 1.0]), chain.bond_expectations()]
    )
    return statistics, expected


def test_ising_chain_statistics():
    """Ising chains, default root (windows and recursion blocks both occur at n = 48).

    Zero field: the bonds s_i s_{i+1} are independent, so the number of domain walls is
    Binomial(n - 1, 1 / (1 + e^{2J})) (chi-square over 17 cells after pooling, 8 000
    draws: power 0.99 against an absolute error of 0.033 in its largest cell, of probability
    0.15, ``power_draws(0.033, 0.15, num_cells=17)``: 7 660 draws).  Random fields and
    couplings: the mean of every spin and every bond against the transfer-matrix expectations
    (z-tests, Bonferroni over 2n - 1 = 95: power 0.99 against a bias of 0.081 standard
    deviations in any one mean, ``(z_{1 - 1e-4 / 190} + z_{0.99}) / sqrt(8 000)``)."""
    n, coupling = 48, 0.8

    def chain_draws(chain, seed):
        process = AnyOrderProcess(chain, n, 2)
        key = jax.random.PRNGKey(seed)
        return engine_draws(process, key, 8_000, SamplerConfig(), chunk=LARGE_MODEL_CHUNK)

    value, rounds, _ = chain_draws(IsingChainOracle.uniform(n, coupling), 21)
    walls = (value[:, 1:] != value[:, :-1]).sum(axis=1)
    assert_gof(walls, domain_wall_law(n, coupling), threshold=1e-4, catches=(0.033, 0.15))
    assert rounds.mean() < n / 3

    chain = random_field_chain(n)
    value, _, _ = chain_draws(chain, 22)
    statistics, expected = spin_and_bond_means(chain, value)
    mean_z_test(statistics, expected, threshold=1e-4)


#: a broken piece of each path through the engine, for every config of
#: :func:`test_exact_on_random_table`, and the draws that reject it: the roots' block
#: verification (autospec, its adaptive and fallback variants, a fixed block), ASSD's token
#: verification, the paper's residual trials (accepted unconditionally: the law becomes
#: min(mu, nu) + TV mu), sequential sampling's steps.  Measured (statistic on dof, p; the right
#: sampler's p on the same keys where given): autospec and block 50 361 on 68, p = 0; assd
#: 2 129 on 68, p = 0; paper 1 029 on 68, p = 1.3e-171; sequential 2 401 on 68, p = 0 (8 000
#: draws each); autospec-adaptive 250 on 59, p = 2.2e-25 (right: 0.65); autospec-fallback 700
#: on 51, p = 6.5e-115 (right: 0.98; its residual trials accepted unconditionally leave these
#: draws unchanged, so its windows' verification is the piece); paper-block2 277 on 75,
#: p = 7.0e-25 (right: 0.86; blocks of 2 steps have a small TV: p = 7e-8 at 8 000 draws)
BROKEN = {
    "autospec": (
        break_block_verification,
        8_000,
    ),
    "autospec-adaptive": (
        break_block_verification,
        2_000,
    ),
    "autospec-fallback": (
        break_block_verification,
        1_000,
    ),
    "block": (break_block_verification, 8_000),
    "assd": (break_token_verification, 8_000),
    "paper": (
        break_residual_trials,
        8_000,
    ),
    "paper-block2": (
        break_residual_trials,
        24_000,
    ),
    "sequential": (
        break_target_steps,
        8_000,
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_wrong_sampler_is_caught(monkeypatch, name):
    """The chi-square of :func:`test_exact_on_random_table` rejects each of its configs with
    one broken piece (:data:`BROKEN`, traced into a compilation of its own), on the first
    keys of its run."""
    assert set(BROKEN) == set(CONFIGS)  # every config's exactness claim has a wrong sampler
    breaks, num_draws = BROKEN[name]
    breaks(monkeypatch)
    codes, law = table_cells(2, jax.random.PRNGKey(13), num_draws, CONFIGS[name], share=False)
    result = chisquare_gof(codes, law)
    assert result.p_value <= 1e-4, result


def test_jit_and_vmap_over_pools():
    process = AnyOrderProcess(random_table(5), N, Q)
    keys = jax.random.split(jax.random.PRNGKey(18), 6).reshape(2, 3, 2)
    batched = jax.jit(jax.vmap(lambda k: run(process, k)))(keys)
    # each pool on its own: its keys padded to CHUNK, the default config's program shared
    # with test_draws_equal_the_reference[autospec]
    for i in range(2):
        value, rounds, _ = draws_of_keys(process, keys[i], SamplerConfig())
        np.testing.assert_array_equal(batched.value[i], value)
        np.testing.assert_array_equal(batched.rounds[i], rounds)


def test_oracle_traced_a_bounded_number_of_times():
    traces = []
    table = random_table(6)

    def counting_oracle(x, mask):
        traces.append(1)
        return table(x, mask)

    process = AnyOrderProcess(counting_oracle, N, Q)
    # tracing is what is counted: ``trace`` shares the jitted function's cache of traces with
    # its calls, without an XLA compilation
    fn = jax.jit(lambda k: run(process, k))
    fn.trace(jax.random.split(jax.random.PRNGKey(0), 4))
    first = len(traces)
    fn.trace(jax.random.split(jax.random.PRNGKey(1), 4))
    assert len(traces) == first  # no retrace for new keys
    assert first <= 16  # shape probes plus one trace per query-batch bucket


def test_too_small_pool_is_refused():
    process = AnyOrderProcess(random_table(6), N, Q)
    with pytest.raises(ValueError, match="num_slots"):
        run(
            process,
            jax.random.split(jax.random.PRNGKey(0), 2),
            CONFIGS["paper"],
            Capacity(num_slots=1),
        )
