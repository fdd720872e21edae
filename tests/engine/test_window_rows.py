"""Root windows are scored in the smallest row count that holds the round's longest window
(``engine.plan.window_rows``, ``engine.rounds.query_round``): the draws and rounds stay those of
the reference sampler, which scores every window with ``max_window - 1`` rows; too few rows would
change them."""

import importlib

import jax
import numpy as np

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import run
from numpyro_autospec.engine.plan import Capacity, plan
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess

plan_module = importlib.import_module("numpyro_autospec.engine.plan")
KEY = jax.random.key_data(jax.random.PRNGKey(0))
N = 256
DRAWS = 6


class RowCountingOracle(CurieWeissOracle):
    """Curie-Weiss that records, at run time, the row count of every block-form call."""

    def __init__(self, num_positions, beta, used):
        super().__init__(num_positions, beta)
        self.used = used

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        rows = int(sites.shape[0])
        jax.debug.callback(lambda: self.used.add(rows))
        return super().log_conditionals(x, ranks, sites, prefix_lengths)


def test_row_counts_halve_down_to_the_smallest_window_for_large_states():
    policy = SamplerConfig().root_policy(4096)
    process = AnyOrderProcess(CurieWeissOracle(4096, beta=1.0), 4096, 2)
    sizes = plan(process, SamplerConfig(), Capacity(), 1, KEY)
    assert sizes.window_rows == (63, 127, 255, 511, 1023, 2047, 4095)
    assert sizes.window_rows[0] == policy.min_window - 1
    assert sizes.window_rows[-1] == policy.score_rows(True)
    small = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    assert plan(small, SamplerConfig(), Capacity(), 8, KEY).window_rows == (63,)


def engine_and_reference(process):
    key = jax.random.PRNGKey(5)
    samples = jax.jit(lambda keys: run(process, keys))(jax.random.split(key, DRAWS))
    values, rounds, queries = reference.sample_many(process, key, DRAWS)
    return samples, values, rounds, queries


def test_smaller_row_counts_keep_the_reference_draws_and_rounds():
    used = set()
    process = AnyOrderProcess(RowCountingOracle(N, 1.0, used), N, 2)
    window_rows = plan(process, SamplerConfig(), Capacity(), DRAWS, KEY).window_rows
    assert len(window_rows) > 1
    samples, values, rounds, queries = engine_and_reference(process)
    np.testing.assert_array_equal(np.asarray(samples.value), values)
    np.testing.assert_array_equal(np.asarray(samples.rounds), rounds)
    assert np.all(np.asarray(samples.queries) <= queries)
    # the engine used a row count below the reference's
    assert min(used & set(window_rows)) < window_rows[-1]


def test_too_few_rows_would_change_the_draws(monkeypatch):
    """The check above can fail: an engine that scores every window with the smallest count
    (rows past it are never computed) does not reproduce the reference."""
    monkeypatch.setattr(plan_module, "window_rows", lambda policy, row_bytes: (15,))
    process = AnyOrderProcess(CurieWeissOracle(N, beta=1.0), N, 2)
    samples, values, rounds, _ = engine_and_reference(process)
    same = np.array_equal(np.asarray(samples.value), values) and np.array_equal(
        np.asarray(samples.rounds), rounds
    )
    assert not same
