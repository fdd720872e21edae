"""Root windows and recursion blocks are scored in the smallest row count that holds the round's
longest block of their kind (``engine.buckets.window_rows``, ``engine.buckets.block_rows``,
``engine.rounds.query_round``), and recursion blocks speculate from the leading rows of their
answers (``engine.state.block_answer``): the draws and rounds stay those of the reference
sampler, which scores every window with ``max_window - 1`` rows, every recursion block with
``recursion_block - 1`` and speculates from all ``answer_rows``; too few rows would change
them."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import run
from numpyro_autospec.engine.buckets import buckets
from numpyro_autospec.engine.plan import Capacity, plan
from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle
from numpyro_autospec.processes import AnyOrderProcess

plan_module = importlib.import_module("numpyro_autospec.engine.plan")
transitions = importlib.import_module("numpyro_autospec.engine.transitions")
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
    assert sizes.block_rows == (3, 7, 15, 31)
    assert sizes.block_rows[-1] == policy.score_rows(False)
    small = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    small_sizes = plan(small, SamplerConfig(), Capacity(), 8, KEY)
    assert (small_sizes.window_rows, small_sizes.block_rows) == ((63,), (3,))


def halving_to_one(policy, row_bytes):
    """Recursion-block row counts halved down to 1 whatever the bytes (at ``N = 256`` the
    shipped rule keeps one count)."""
    return buckets(policy.score_rows(False), 1, 0, factor=2)


#: the blocks whose row counts each check exercises: root windows (the default root, N = 256) or
#: recursion blocks (a root of recursion blocks, whose residual trials run blocks of 32, 16, ...
#: steps below the root's 64)
CASES = {
    "window_rows": (SamplerConfig(), N),
    "block_rows": (SamplerConfig(root_windows=False), 64),
}

#: windows of 8 steps, each followed by a recursion block of 8 steps unless it kept all of
#: them, with answers of 64 rows: recursion blocks speculate from their answers' first 8 rows
FALLBACKS = SamplerConfig(window=8, window_growth=0, floor=8, fallback=8)


def random_chain(n):
    """An Ising chain with random couplings and fields: every site has its own row (Curie-Weiss's
    free sites share one, so a wrong row could go unnoticed)."""
    rng = np.random.default_rng(0)
    return IsingChainOracle(rng.uniform(-1.0, 1.2, n - 1), rng.normal(0.0, 0.5, n))


def case_oracle(kind, used=None):
    """The oracle, configuration and size of a case: Curie-Weiss for the row counts (recording
    the row counts it is called with when ``used`` is a set), the random chain for the
    speculation from leading rows (``"block_answer"``)."""
    if kind == "block_answer":
        return random_chain(64), FALLBACKS, 64
    config, n = CASES[kind]
    oracle = CurieWeissOracle(n, 1.0) if used is None else RowCountingOracle(n, 1.0, used)
    return oracle, config, n


REFERENCE_KEY = jax.random.PRNGKey(5)


@pytest.fixture(scope="module")
def reference_draws():
    """The reference's draws, rounds and queries of each case, drawn once (the reference does
    not read the engine's row counts or answers, which the tests patch): the check that the
    engine reproduces them and the check that a wrong engine does not compare with the same
    reference (each reference run compiles a program per block length)."""
    cache = {}

    def draws(kind):
        if kind not in cache:
            oracle, config, n = case_oracle(kind)
            process = AnyOrderProcess(oracle, n, 2)
            cache[kind] = reference.sample_many(process, REFERENCE_KEY, DRAWS, config)
        return cache[kind]

    return draws


def engine_draws(process, config):
    keys = jax.random.split(REFERENCE_KEY, DRAWS)
    return jax.jit(lambda keys: run(process, keys, config))(keys)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_smaller_row_counts_keep_the_reference_draws_and_rounds(monkeypatch, reference_draws, kind):
    monkeypatch.setattr(plan_module, "block_rows", halving_to_one)
    used = set()
    oracle, config, n = case_oracle(kind, used)
    process = AnyOrderProcess(oracle, n, 2)
    counts = getattr(plan(process, config, Capacity(), DRAWS, KEY), kind)
    assert len(counts) > 1
    samples = engine_draws(process, config)
    values, rounds, queries = reference_draws(kind)
    np.testing.assert_array_equal(np.asarray(samples.value), values)
    np.testing.assert_array_equal(np.asarray(samples.rounds), rounds)
    assert np.all(np.asarray(samples.queries) <= queries)
    # the engine used a row count below the reference's
    assert min(used & set(counts)) < counts[-1]


def test_recursion_blocks_speculating_from_leading_rows_keep_the_reference_draws(
    monkeypatch, reference_draws
):
    """Recursion blocks speculating in a phase of their own from their answers' leading rows
    (``Plan.block_speculation``, on for large answers only) beside root windows: the
    reference's draws and rounds."""
    monkeypatch.setattr(plan_module, "block_speculation", lambda *args: True)
    oracle, config, n = case_oracle("block_answer")
    process = AnyOrderProcess(oracle, n, 2)
    assert plan(process, config, Capacity(), DRAWS, KEY).block_speculation
    samples = engine_draws(process, config)
    values, rounds, _ = reference_draws("block_answer")
    np.testing.assert_array_equal(np.asarray(samples.value), values)
    np.testing.assert_array_equal(np.asarray(samples.rounds), rounds)


def test_one_compiled_size_per_call_site_keeps_the_reference_draws(reference_draws):
    """``Capacity(max_buckets=1)`` compiles every oracle call site once, at its largest size
    (the quickest compilation): every round runs at full size, and the draws, rounds and
    queries are the reference's (the checks below show that these comparisons can fail)."""
    oracle, config, n = case_oracle("window_rows")
    process = AnyOrderProcess(oracle, n, 2)
    capacity = Capacity(max_buckets=1)
    default = plan(process, config, Capacity(), DRAWS, KEY)
    sizes = plan(process, config, capacity, DRAWS, KEY)
    assert len(default.window_rows) > 1 and sizes.window_rows == default.window_rows[-1:]
    for field in ["query_buckets", "lane_buckets", "block_buckets", "window_buckets"]:
        assert getattr(sizes, field) == getattr(default, field)[-1:], field
    keys = jax.random.split(REFERENCE_KEY, DRAWS)
    samples = jax.jit(lambda keys: run(process, keys, config, capacity))(keys)
    values, rounds, queries = reference_draws("window_rows")
    np.testing.assert_array_equal(np.asarray(samples.value), values)
    np.testing.assert_array_equal(np.asarray(samples.rounds), rounds)
    assert np.all(np.asarray(samples.queries) <= queries)


def first_row_only(context, answer):
    """A wrong ``block_answer``: every row replaced by the first (the rows past it unused)."""
    return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf[:1], leaf.shape), answer)


@pytest.mark.parametrize("kind", [*sorted(CASES), "block_answer"])
def test_too_few_rows_would_change_the_draws(monkeypatch, reference_draws, kind):
    """The checks can fail: an engine that scores every window (every recursion block) with one
    row, or speculates every recursion block from the first row of its answer (rows past it are
    never used), does not reproduce the reference draws the checks above compare with."""
    if kind == "block_answer":
        monkeypatch.setattr(plan_module, "block_speculation", lambda *args: True)
        monkeypatch.setattr(transitions, "block_answer", first_row_only)
    else:
        monkeypatch.setattr(plan_module, kind, lambda policy, row_bytes: (1,))
    oracle, config, n = case_oracle(kind)
    samples = engine_draws(AnyOrderProcess(oracle, n, 2), config)
    values, rounds, _ = reference_draws(kind)
    same = np.array_equal(np.asarray(samples.value), values) and np.array_equal(
        np.asarray(samples.rounds), rounds
    )
    assert not same
