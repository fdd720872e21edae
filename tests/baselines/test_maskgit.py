"""MaskGIT decoding: exact with one site per round in a random order (goodness of fit against
the enumerated law), biased otherwise (the same test rejects it), and its costs."""

import jax
import numpy as np
import pytest

from benchmarks.baselines import cosine_schedule, maskgit_run, uniform_schedule
from numpyro_autospec.oracles import CurieWeissOracle, TableOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.gof import assert_gof, chisquare_gof, encode_configurations, power_draws

NUM_DRAWS = 44_000
THRESHOLD = 1e-4


def _table_process():
    """A strongly dependent joint on [3]^4 (log-weights normal with standard deviation 2)."""
    table = np.random.default_rng(0).normal(scale=2.0, size=(3,) * 4)
    return AnyOrderProcess(TableOracle(table), 4, 3)


def _draw_codes(process, schedule, order, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), NUM_DRAWS)
    samples = jax.jit(lambda keys: maskgit_run(process, keys, schedule, order))(keys)
    return encode_configurations(np.asarray(samples.value), 3)


def test_power_of_the_goodness_of_fit_tests():
    """44000 draws catch an error of 0.015 in a cell of probability 0.1 (power 0.99 at
    p <= 1e-4, computed with all 81 cells: pooling leaves 79, and fewer cells only raise the
    power, so the bound holds)."""
    assert power_draws(0.015, 0.1, num_cells=81) <= NUM_DRAWS


def test_one_site_per_round_in_random_order_is_exact():
    process = _table_process()
    codes = _draw_codes(process, uniform_schedule(4, 4), "random")
    exact = np.exp(process.oracle.log_probs)
    assert_gof(codes, exact, threshold=THRESHOLD, label="MaskGIT, k = 1, random order")


@pytest.mark.parametrize(
    ("schedule", "order"),
    [((2, 2), "random"), ((4,), "random"), ((1, 1, 1, 1), "confidence"), ((2, 2), "confidence")],
)
def test_the_same_test_rejects_the_biased_settings(schedule, order):
    """Two sites per round from the product of marginals, or the most confident site first,
    is not the target: the goodness-of-fit test above fails on it."""
    process = _table_process()
    codes = _draw_codes(process, schedule, order, seed=1)
    exact = np.exp(process.oracle.log_probs)
    assert chisquare_gof(codes, exact).p_value <= THRESHOLD
    with pytest.raises(AssertionError, match="chi-square goodness of fit failed"):
        assert_gof(codes, exact, threshold=THRESHOLD)


def test_rounds_queries_and_pinned_sites():
    table = TableOracle(np.random.default_rng(1).normal(size=(3,) * 5))
    observed = np.array([2, 0, 0, 1, 0])
    mask = np.array([True, False, False, True, False])
    process = AnyOrderProcess(table, 5, 3, observed_values=observed, observed_mask=mask)
    keys = jax.random.split(jax.random.PRNGKey(2), 7)
    for order in ("confidence", "random"):
        samples = maskgit_run(process, keys, (2, 1), order)
        assert samples.rounds.tolist() == [2] * 7 and samples.queries.tolist() == [2] * 7
        assert samples.conditionals.tolist() == [10] * 7
        np.testing.assert_array_equal(
            np.asarray(samples.value)[:, mask], np.broadcast_to(observed[mask], (7, 2))
        )


def test_cosine_schedule_unmasks_everything_at_least_one_per_round():
    for n, rounds in [(16, 4), (64, 64), (1024, 12), (7, 3)]:
        schedule = cosine_schedule(n, rounds)
        assert len(schedule) == rounds and sum(schedule) == n and min(schedule) >= 1
    assert cosine_schedule(1000, 10)[0] < cosine_schedule(1000, 10)[-1]  # few first


def test_bad_input_names_the_site_and_the_schedule():
    process = AnyOrderProcess(CurieWeissOracle(8, beta=1.0), 8, 2, name="spins")
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match=r"site 'spins'.*8 free sites.*\[3, 3\]"):
        maskgit_run(process, keys, (3, 3))
    with pytest.raises(ValueError, match="at least one site per round"):
        maskgit_run(process, keys, (8, 0))
    with pytest.raises(ValueError, match="order must be one of"):
        maskgit_run(process, keys, (8,), order="left-to-right")
    with pytest.raises(ValueError, match="num_rounds = 9 exceeds num_steps = 8"):
        cosine_schedule(8, 9)
