"""The block form of the oracle protocol in the engine (docs/algorithm.md, section 2a).

Oracles that declare ``scores_blocks`` are scored with one ``log_conditionals`` call per block;
order-dependent oracles (``depends_on_order``) are queried through ``log_conditionals`` only.
Exactness by chi-square with 30 000 draws, fixed seeds, pass when p > 1e-4: over the
:math:`3^4 = 81` configurations, 76 cells after pooling (77 for the ASSD table,
``random_table(0)``), an absolute error of 0.013 in a cell of probability 0.05 is caught at
power 0.99 (``tests/gof.py`` ``power_draws(0.013, 0.05, num_cells=76)``: 29 771 draws; with
77 cells: 29 911 draws); the infilling and pinned laws have 27 cells, where 30 000 draws catch
0.011 at p = 0.05.  A cell of 0.05 is one of the largest of these Dirichlet(0.6)
tables: at the table's median cell (p = 0.0054) the same draws catch only 0.0044, a relative
error of 80%.  The engine with a broken verifier (block or token) or residual on the
block-scoring path is rejected by the same chi-square, for every law checked here
(:func:`test_wrong_sampler_on_the_block_path_is_caught`); the correct draws are also rejected
against wrong laws.  Draws and rounds equal the reference
sampler's, key for key, on both paths.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec import reference
from numpyro_autospec.config import Capacity, SamplerConfig
from numpyro_autospec.engine import run
from numpyro_autospec.engine._plan import plan
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles import (
    AnyOrderOracle,
    CurieWeissOracle,
    PerturbedOracle,
    TableOracle,
    check_block_form,
)
from numpyro_autospec.oracles._base import marginal_conditionals
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.broken import (
    break_block_verification,
    break_residual_trials,
    break_token_verification,
)
from tests.engine.programs import draws_in_calls
from tests.gof import assert_gof, chisquare_gof, encode_configurations
from tests.tables import random_table

N, Q = 4, 3
NUM_DRAWS = 30_000
CONFIGS = {
    "autospec": SamplerConfig(),
    "paper": SamplerConfig(root_windows=False),
    "assd": SamplerConfig(method="assd", block_size=3),
}


class BlockTable(TableOracle):
    """A table whose block form (derived from ``log_marginals``) is declared one evaluation:
    the engine's block-scoring path with exact answers."""

    scores_blocks = True


class BlockPerturbed(PerturbedOracle):
    """An inconsistent oracle on the block-scoring path."""

    scores_blocks = True


class LastSiteTilted(AnyOrderOracle):
    """An order-dependent oracle: the table's conditional tilted towards the value of the site
    pinned last (the site of rank ``prefix_length - 1``).  It has no set form."""

    scores_blocks = True
    depends_on_order = True

    def __init__(self, table: TableOracle, tilt: float) -> None:
        self.table, self.tilt = table, tilt
        self.num_positions, self.num_categories = table.num_positions, table.num_categories

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        rows = marginal_conditionals(self.table.log_marginals, x, ranks, sites, prefix_lengths)
        last = jnp.argmax(ranks[None, :] == prefix_lengths[:, None] - 1, axis=1)
        bonus = jnp.where(prefix_lengths[:, None] > 0, jax.nn.one_hot(x[last], Q), 0.0)
        return jax.nn.log_softmax(rows + self.tilt * bonus, axis=-1)


def random_order_law(oracle, observed=None, mask=None) -> np.ndarray:
    """Law of sequential sampling along a uniformly random order of the free sites (observed
    sites pinned first, in index order), by enumeration."""
    mask = np.zeros(N, bool) if mask is None else mask
    configs = np.array(list(itertools.product(range(Q), repeat=N)), np.int32)
    conditionals = jax.jit(jax.vmap(oracle.log_conditionals, (0, None, None, None)))
    free = [i for i in range(N) if not mask[i]]
    observed_sites = [i for i in range(N) if mask[i]]
    total = np.zeros(len(configs))
    orders = list(itertools.permutations(free))
    for free_order in orders:
        order = np.array(observed_sites + list(free_order), np.int32)
        ranks = np.argsort(order).astype(np.int32)
        start = len(observed_sites)
        sites = order[start:]
        rows = np.asarray(
            conditionals(configs, ranks, sites, np.arange(start, N, dtype=np.int32)), np.float64
        )
        picked = rows[np.arange(len(configs))[:, None], np.arange(len(sites)), configs[:, sites]]
        log_p = picked.sum(axis=1)
        total += np.exp(log_p) / len(orders)
    if observed is not None:
        total *= np.all((configs == observed) | ~mask, axis=1)
    return total / total.sum()


def engine_values(process, seed, config=None):
    return chunked_draws(process, seed, config)[2]


def chunked_draws(process, seed, config=None):
    """``NUM_DRAWS`` draws in three calls of one compiled program (:func:`draws_in_calls`): the
    keys, the samples (rounds and queries too) and the values."""
    keys = jax.random.split(jax.random.PRNGKey(seed), NUM_DRAWS)
    samples = draws_in_calls(jax.jit(lambda k: run(process, k, config)), keys, NUM_DRAWS // 3)
    return keys, samples, samples.value


#: infilling in a fixed order: site 1 observed (value 2), the others fixed in the order 3, 0, 2
ORDER = np.array([3, 1, 0, 2])
MASK = np.array([False, True, False, False])
OBSERVED = np.array([0, 2, 0, 0])


@pytest.fixture(scope="module")
def table_draws():
    """A table's 30 000 draws with the default sampler (root windows)."""
    process = AnyOrderProcess(BlockTable(random_table(1).log_probs), N, Q)
    return (process, CONFIGS["autospec"], *chunked_draws(process, 4, CONFIGS["autospec"]))


@pytest.fixture(scope="module")
def infilling_draws():
    """The inconsistent oracle's 30 000 infilling draws with the paper's sampler (recursion
    blocks)."""
    oracle = BlockPerturbed(random_table(2), 0.5, jax.random.PRNGKey(5))
    process = AnyOrderProcess(
        oracle, N, Q, observed_values=OBSERVED, observed_mask=MASK, order=ORDER
    )
    return (process, CONFIGS["paper"], *chunked_draws(process, 5, CONFIGS["paper"]))


@pytest.fixture(scope="module")
def assd_draws():
    """A table's 30 000 draws with the self-speculative peer (token verification of windows
    scored by the block form)."""
    process = AnyOrderProcess(BlockTable(random_table(0).log_probs), N, Q)
    return (process, CONFIGS["assd"], *chunked_draws(process, 3, CONFIGS["assd"]))


#: the draws each sampler's equality check reads: the first 40 draws of the exactness checks'
#: runs (one compiled program serves both)
DRAWS_OF = {"autospec": "table_draws", "paper": "infilling_draws", "assd": "assd_draws"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_block_scoring_draws_equal_the_reference(request, name):
    """The engine's first 40 draws, key for key, against the reference sampler: a table with
    root windows and with the self-speculative peer, the inconsistent oracle infilling a fixed
    order with recursion blocks."""
    process, config, keys, samples, _ = request.getfixturevalue(DRAWS_OF[name])
    draws = [reference.sample(process, key, config) for key in keys[:40]]
    np.testing.assert_array_equal(
        np.asarray(samples.value)[:40], np.stack([np.asarray(d.value) for d in draws])
    )
    reference_rounds = np.array([d.rounds for d in draws])
    if name != "autospec":
        # 10 000 draws a call share the default pool's slots: a residual batch or a window
        # may wait for slots (more rounds, the same draws); the same keys in a pool of their
        # own have the reference's rounds
        assert np.all(np.asarray(samples.rounds)[:40] >= reference_rounds)
        samples = jax.jit(lambda k: run(process, k, config))(keys[:40])
    np.testing.assert_array_equal(np.asarray(samples.rounds)[:40], reference_rounds)
    assert np.all(np.asarray(samples.queries)[:40] <= [d.queries for d in draws])


def test_block_scoring_needs_fewer_evaluations_than_single_steps():
    """Curie-Weiss scores blocks; the same model as a plain function does not."""
    n = 64
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    oracle = CurieWeissOracle(n, beta=1.0)
    block = run(AnyOrderProcess(oracle, n, 2), keys)
    single = run(AnyOrderProcess(lambda x, mask: oracle(x, mask), n, 2), keys)
    np.testing.assert_array_equal(np.asarray(block.value), np.asarray(single.value))
    assert np.all(np.asarray(block.queries) <= n)  # at most one evaluation per site
    assert np.asarray(block.queries).mean() < np.asarray(single.queries).mean() / 4
    assert np.all(np.asarray(block.conditionals) >= n)


class ShapeRecorder(LastSiteTilted):
    """The order-dependent oracle, recording the number of rows of every traced call."""

    def __init__(self, table: TableOracle, tilt: float) -> None:
        super().__init__(table, tilt)
        self.rows: list[int] = []

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        self.rows.append(sites.shape[0])
        return super().log_conditionals(x, ranks, sites, prefix_lengths)


def test_an_order_aware_oracle_answers_a_round_in_one_call():
    """An order-dependent oracle scores a block and answers the next speculation in one
    ``log_conditionals`` call: the engine's program calls it with the scoring rows and the
    answer's rows together, never with the scoring rows alone (the plan's shape evaluations
    ask for an answer of ``R`` rows).  A scoring call beside an answer call would traverse a
    network twice per round."""
    oracle = ShapeRecorder(random_table(3), tilt=1.0)
    process = AnyOrderProcess(oracle, N, Q)
    sizes = plan(process, SamplerConfig(), Capacity(), 1, jax.random.PRNGKey(0))
    oracle.rows.clear()  # the process's signature check and the plan's shape evaluation
    jax.jit(lambda key: run(process, key[None])).lower(jax.random.PRNGKey(0))
    merged = sizes.unit_rows + sizes.answer_rows
    assert merged in oracle.rows, oracle.rows
    assert set(oracle.rows) <= {sizes.answer_rows, merged}, oracle.rows


@pytest.mark.slow
@pytest.mark.parametrize("draws", ["table_draws", "assd_draws"])
def test_block_scoring_is_exact_on_a_table(request, draws):
    """The default sampler (block verification) and the self-speculative peer (token
    verification), each on a table of its own."""
    process, _, _, _, values = request.getfixturevalue(draws)
    law = np.exp(process.oracle.log_probs).ravel()
    assert_gof(encode_configurations(values, Q), law, catches=(0.013, 0.05))


@pytest.mark.slow
def test_block_scoring_is_exact_for_an_inconsistent_oracle_with_infilling(infilling_draws):
    process, _, _, _, values = infilling_draws
    assert (values[:, 1] == 2).all()
    expected = np.exp(process.oracle.sequential_log_probs(ORDER, OBSERVED, MASK)).ravel()
    assert_gof(encode_configurations(values, Q), expected, catches=(0.011, 0.05))


#: the order-dependent oracle's observed setting: site 2 observed, value 2
PINNED_VALUES = np.array([0, 0, 2, 0], np.int32)
PINNED_MASK = np.array([False, False, True, False])


@pytest.fixture(scope="module")
def order_dependent_draws():
    oracle = LastSiteTilted(random_table(3), tilt=1.5)
    free = engine_values(AnyOrderProcess(oracle, N, Q), 6)
    pinned = engine_values(
        AnyOrderProcess(oracle, N, Q, observed_values=PINNED_VALUES, observed_mask=PINNED_MASK),
        7,
    )
    return oracle, free, pinned, PINNED_VALUES, PINNED_MASK


@pytest.mark.slow
def test_order_dependent_oracle_draws_the_random_order_sequential_law(order_dependent_draws):
    oracle, free, pinned, observed, mask = order_dependent_draws
    law = random_order_law(oracle)
    assert_gof(encode_configurations(free, Q), law, label="free", catches=(0.013, 0.05))
    assert (pinned[:, 2] == 2).all()
    expected = random_order_law(oracle, observed, mask)
    assert_gof(encode_configurations(pinned, Q), expected, label="observed", catches=(0.011, 0.05))


@pytest.mark.slow
def test_wrong_laws_are_rejected(order_dependent_draws):
    """Wrong-law comparisons (no wrong sampler runs here: see
    :func:`test_wrong_sampler_on_the_block_path_is_caught`): the same correct draws against the
    law of the untilted table (what a sampler that ignored the order would draw) and against the
    law of the fixed order 0, 1, 2, 3."""
    oracle, free, _, _, _ = order_dependent_draws
    untilted = np.exp(oracle.table.log_probs).ravel()
    assert chisquare_gof(encode_configurations(free, Q), untilted).p_value <= 1e-4
    fixed = LastSiteTilted(oracle.table, 1.5)
    configs = np.array(list(itertools.product(range(Q), repeat=N)), np.int32)
    rows = np.asarray(
        jax.vmap(fixed.log_conditionals, (0, None, None, None))(
            configs, np.arange(N), np.arange(N), np.arange(N)
        )
    )
    law = np.exp(rows[np.arange(len(configs))[:, None], np.arange(N), configs].sum(axis=1))
    assert chisquare_gof(encode_configurations(free, Q), law / law.sum()).p_value <= 1e-4


#: wrong samplers on the block-scoring path: the process, the config, the broken piece
#: (tests/engine/broken.py), the exact law its correct sampler draws and the draws (one call).
#: Measured at 1 000 draws, order-dependent with the observed site: statistic 1 174 on 20 dof,
#: p = 2.6e-236 (the right sampler on the same keys: p = 0.22)
BROKEN_BLOCK_PATHS = {
    # the default root's block verification keeps every drafted site (a table's block form)
    "table-block-verification": lambda: (
        AnyOrderProcess(BlockTable(random_table(1).log_probs), N, Q),
        CONFIGS["autospec"],
        break_block_verification,
        np.exp(random_table(1).log_probs).ravel(),
        4_000,
    ),
    # the self-speculative peer's token verification keeps every drafted site
    "assd-token-verification": lambda: (
        AnyOrderProcess(BlockTable(random_table(0).log_probs), N, Q),
        CONFIGS["assd"],
        break_token_verification,
        np.exp(random_table(0).log_probs).ravel(),
        4_000,
    ),
    # the same broken verifier on the order-dependent oracle (queried by log_conditionals only)
    "order-dependent-block-verification": lambda: (
        AnyOrderProcess(LastSiteTilted(random_table(3), tilt=1.5), N, Q),
        CONFIGS["autospec"],
        break_block_verification,
        random_order_law(LastSiteTilted(random_table(3), tilt=1.5)),
        4_000,
    ),
    # the same on the order-dependent oracle with site 2 observed (value 2): the observed law
    # of test_order_dependent_oracle_draws_the_random_order_sequential_law
    "order-dependent-observed-block-verification": lambda: (
        AnyOrderProcess(
            LastSiteTilted(random_table(3), tilt=1.5),
            N,
            Q,
            observed_values=PINNED_VALUES,
            observed_mask=PINNED_MASK,
        ),
        CONFIGS["autospec"],
        break_block_verification,
        random_order_law(LastSiteTilted(random_table(3), tilt=1.5), PINNED_VALUES, PINNED_MASK),
        1_000,
    ),
    # the paper's residual trials accepted unconditionally, the inconsistent oracle infilling
    "infilling-residual": lambda: (
        AnyOrderProcess(
            BlockPerturbed(random_table(2), 0.5, jax.random.PRNGKey(5)),
            N,
            Q,
            observed_values=OBSERVED,
            observed_mask=MASK,
            order=ORDER,
        ),
        CONFIGS["paper"],
        break_residual_trials,
        np.exp(
            BlockPerturbed(random_table(2), 0.5, jax.random.PRNGKey(5)).sequential_log_probs(
                ORDER, OBSERVED, MASK
            )
        ).ravel(),
        4_000,
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_BLOCK_PATHS))
def test_wrong_sampler_on_the_block_path_is_caught(monkeypatch, name):
    """The chi-square of the exactness tests above rejects (p <= 1e-4) the engine with one
    broken piece on the block-scoring path, in one fresh compilation (the piece is read when
    the engine is traced)."""
    process, config, breaks, law, num_draws = BROKEN_BLOCK_PATHS[name]()
    breaks(monkeypatch)
    keys = jax.random.split(jax.random.PRNGKey(8), num_draws)
    values = np.asarray(jax.jit(lambda k: run(process, k, config))(keys).value)
    result = chisquare_gof(encode_configurations(values, Q), law)
    assert result.p_value <= 1e-4, result


def test_disagreeing_block_form_is_caught():
    class Shifted(CurieWeissOracle):
        def log_conditionals(self, x, ranks, sites, prefix_lengths):
            return super().log_conditionals(x, ranks, sites, prefix_lengths + 1)

    check_block_form(CurieWeissOracle(16, beta=1.0, h=0.2))
    check_block_form(BlockTable(random_table(4).log_probs))
    with pytest.raises(OracleError, match="log_conditionals disagrees with log_marginals"):
        check_block_form(Shifted(16, beta=1.0, h=0.2))


def test_bad_block_shapes_and_nan_rows_name_the_site():
    class WrongShape(BlockTable):
        def log_conditionals(self, x, ranks, sites, prefix_lengths):
            return super().log_conditionals(x, ranks, sites, prefix_lengths)[:, :2]

    class NanRow(BlockTable):
        def log_conditionals(self, x, ranks, sites, prefix_lengths):
            rows = super().log_conditionals(x, ranks, sites, prefix_lengths)
            return jnp.where((sites == 2)[:, None] & (prefix_lengths >= 1)[:, None], jnp.nan, rows)

    table = random_table(5).log_probs
    with pytest.raises(OracleError, match=r"site 'spins'.*shape \(L, 3\)"):
        AnyOrderProcess(WrongShape(table), N, Q, name="spins")
    process = AnyOrderProcess(NanRow(table), N, Q, name="spins")
    message = r"site 'spins': .*NanRow.log_conditionals returned NaN in row 2"
    with pytest.raises(OracleError, match=message):
        jax.block_until_ready(run(process, jax.random.split(jax.random.PRNGKey(0), 8)))
