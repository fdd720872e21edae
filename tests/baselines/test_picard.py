"""Picard iteration of the Euler-Maruyama chain: at tolerance 0 it is the sequential chain draw
for draw in fewer rounds; at a loose tolerance the same comparison (and a two-sample test of
the law) rejects it; its rounds and queries on tiny cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.baselines import picard_run
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine import sequential_run
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess, default_times
from tests.gof import two_sample_chisquare

POINTS = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
NUM_STEPS = 64
FLOAT_TOLERANCE = 1e-4  # the sums run in another order: float32 rounding, nothing more


def _process(num_steps=NUM_STEPS):
    return DiffusionProcess(PointCloudDenoiser(POINTS), 2, default_times(num_steps, 200.0))


def _labels(values):
    """The point each output landed on."""
    return np.argmin(np.sum((np.asarray(values)[:, None, :] - POINTS[None]) ** 2, -1), axis=1)


def _max_difference_to_euler(process, keys, window_size, tolerance):
    picard = jax.jit(lambda keys: picard_run(process, keys, window_size, tolerance))(keys)
    euler = jax.jit(lambda keys: sequential_run(process, keys))(keys)
    return float(jnp.max(jnp.abs(picard.value - euler.value))), picard, euler


@pytest.mark.parametrize("window_size", [8, 64])
def test_tolerance_zero_is_the_euler_chain_draw_for_draw_in_fewer_rounds(window_size):
    process = _process()
    keys = jax.random.split(jax.random.PRNGKey(0), 32)
    difference, picard, euler = _max_difference_to_euler(process, keys, window_size, 0.0)
    assert difference < FLOAT_TOLERANCE
    assert np.all(np.asarray(picard.rounds) <= NUM_STEPS + 1)
    assert float(jnp.mean(picard.rounds)) < NUM_STEPS + 1 == int(euler.rounds[0])


def test_a_loose_tolerance_is_caught_by_the_same_comparison_and_by_the_law():
    """tolerance = inf accepts the first Picard guess of the window: the outputs leave the
    Euler chain's (the draw-for-draw check fails) and so does their law (a chi-square test of
    homogeneity of the landing point against the Euler chain, 2000 draws each, p <= 1e-4)."""
    process = _process()
    keys = jax.random.split(jax.random.PRNGKey(1), 2000)
    difference, picard, euler = _max_difference_to_euler(process, keys, NUM_STEPS, float("inf"))
    assert difference > 0.5
    assert picard.rounds.tolist() == [2] * 2000  # one iteration and the final query
    other_keys = jax.random.split(jax.random.PRNGKey(2), 2000)
    exact = jax.jit(lambda keys: sequential_run(process, keys))(other_keys)
    biased = two_sample_chisquare(_labels(picard.value), _labels(exact.value))
    assert biased.p_value <= 1e-4
    # the test is not trigger-happy: the Euler chain against itself on other keys passes
    assert two_sample_chisquare(_labels(euler.value), _labels(exact.value)).p_value > 1e-4


@pytest.mark.parametrize(
    ("window_size", "tolerance", "rounds", "queries"),
    [(4, float("inf"), 3, 9), (8, float("inf"), 2, 9), (1, 0.0, 9, 9), (3, float("inf"), 4, 9)],
)
def test_rounds_and_queries(window_size, tolerance, rounds, queries):
    """N = 8 steps: a window of p steps accepted at once takes ceil(N / p) rounds of at most p
    queries, plus the final denoising; p = 1 is the sequential chain."""
    samples = picard_run(
        _process(8), jax.random.split(jax.random.PRNGKey(3), 3), window_size, tolerance
    )
    assert samples.rounds.tolist() == [rounds] * 3
    assert samples.queries.tolist() == [queries] * 3


def test_tolerance_may_be_traced():
    process = _process(16)
    keys = jax.random.split(jax.random.PRNGKey(4), 4)
    traced = jax.jit(lambda tolerance: picard_run(process, keys, 8, tolerance))(0.01)
    concrete = picard_run(process, keys, 8, 0.01)
    np.testing.assert_allclose(np.asarray(traced.value), np.asarray(concrete.value), atol=1e-6)
    assert traced.rounds.tolist() == concrete.rounds.tolist()


def test_bad_input():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="window_size must be a positive integer, got 0"):
        picard_run(_process(8), keys, 0, 0.0)
    with pytest.raises(
        ValueError, match=r"tolerance must be a scalar >= 0 \(inf allowed\), got -1"
    ):
        picard_run(_process(8), keys, 4, -1.0)
    with pytest.raises(ValueError, match="needs a DiffusionProcess, got AnyOrderProcess"):
        picard_run(AnyOrderProcess(CurieWeissOracle(4, beta=1.0), 4, 2), keys, 4, 0.0)
