"""The goodness-of-fit harness passes exact samplers and catches slightly wrong ones.

Samplers here are numpy draws from known tables with fixed seeds.  "Wrong" samplers move an
absolute ``delta`` of 1-2% of probability mass onto one cell of probability ~0.1 and rescale
the others proportionally -- the hardest error of that size to see -- at the draw counts the
project's sampler tests use (40k-100k).  Each such test checks first that its draw count is at
least :func:`power_draws` (power 0.99 at the default threshold 1e-4).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from tests.gof import (
    DEFAULT_THRESHOLD,
    assert_gof,
    assert_projections_agree,
    assert_two_sample,
    chisquare_gof,
    encode_configurations,
    mean_z_test,
    power_draws,
    two_sample_chisquare,
)

Q, N_SITES = 3, 3  # a (3, 3, 3) table: 27 cells
HEAVY_CELL = (1, 0, 2)
HEAVY_PROBABILITY = 0.1
SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    """A random (3, 3, 3) table with mass 0.1 on ``HEAVY_CELL``."""
    rest = np.random.default_rng(2024).dirichlet(np.full(Q**N_SITES, 2.0))
    flat_heavy = np.ravel_multi_index(HEAVY_CELL, (Q,) * N_SITES)
    rest[flat_heavy] = 0.0
    probs = rest / rest.sum() * (1.0 - HEAVY_PROBABILITY)
    probs[flat_heavy] = HEAVY_PROBABILITY
    return probs.reshape((Q,) * N_SITES)


def perturbed(probs: np.ndarray, cell: tuple[int, ...], delta: float) -> np.ndarray:
    """``probs`` with ``delta`` more mass on ``cell``, the other cells rescaled to compensate."""
    wrong = probs * (1.0 - (probs[cell] + delta)) / (1.0 - probs[cell])
    wrong[cell] = probs[cell] + delta
    return wrong


def draw_codes(probs: np.ndarray, num_draws: int, seed: int) -> np.ndarray:
    """iid flat codes from a table, by drawing configurations and encoding them."""
    flat = np.random.default_rng(seed).choice(probs.size, size=num_draws, p=probs.ravel())
    configurations = np.stack(np.unravel_index(flat, probs.shape), axis=1)
    return encode_configurations(configurations, Q)


# --------------------------------------------------------------------------------------------
# One sample against a table
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("num_draws", [40_000, 100_000])
def test_exact_sampler_passes(table, seed, num_draws):
    result = assert_gof(draw_codes(table, num_draws, seed), table, label="exact sampler")
    assert result.p_value > DEFAULT_THRESHOLD
    assert result.num_cells == table.size and result.dof == table.size - 1


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("delta", "num_draws"), [(0.02, 40_000), (0.01, 100_000)])
def test_wrong_sampler_fails(table, seed, delta, num_draws):
    assert num_draws >= power_draws(delta, HEAVY_PROBABILITY, num_cells=table.size)
    codes = draw_codes(perturbed(table, HEAVY_CELL, delta), num_draws, seed)
    with pytest.raises(AssertionError, match=r"worst cells:\n  cell \(1, 0, 2\)"):
        assert_gof(codes, table, label="wrong sampler")


def test_counts_and_codes_agree(table):
    codes = draw_codes(table, 5_000, seed=3)
    counts = np.bincount(codes, minlength=table.size).reshape(table.shape)
    assert chisquare_gof(codes, table) == chisquare_gof(counts, table)
    assert chisquare_gof(codes, table) == chisquare_gof(counts.ravel(), table.ravel())


def test_sparse_cells_are_pooled():
    probs = np.array([0.5, 0.4, 0.04, 0.04, 0.01, 0.01])
    counts = np.array([52, 38, 4, 6, 0, 0])  # 100 draws: the last four expect < 5 each
    result = chisquare_gof(counts, probs)
    assert result.num_cells == 3 and result.dof == 2
    expected = 100 * np.array([0.5, 0.4, 0.10])
    statistic = np.sum((np.array([52, 38, 10]) - expected) ** 2 / expected)
    np.testing.assert_allclose(result.statistic, statistic)


def test_pooled_cell_grows_until_large_enough():
    # Only the last cell expects < 5; on its own the pooled cell would still be too small.
    result = chisquare_gof(np.array([30, 30, 38, 2]), np.array([0.3, 0.3, 0.38, 0.02]))
    assert result.num_cells == 3


def test_zero_probability_cells():
    probs = np.array([0.5, 0.0, 0.5])
    assert chisquare_gof(np.array([0, 2, 0, 2]), probs).p_value > 0.5
    hit = chisquare_gof(np.array([0, 2, 1, 2]), probs)
    assert hit.p_value == 0.0 and hit.statistic == np.inf
    with pytest.raises(AssertionError, match="probability 0"):
        assert_gof(np.array([0, 2, 1, 2]), probs)


def test_rejects_malformed_input(table):
    with pytest.raises(ValueError, match="sums to"):
        chisquare_gof(np.array([0, 1]), np.array([0.5, 0.6]))
    with pytest.raises(ValueError, match="out of range"):
        chisquare_gof(np.array([0, 27]), table)
    with pytest.raises(ValueError, match="encode configurations"):
        chisquare_gof(np.zeros((10, 3), dtype=int), table)


@given(
    radices=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    data=st.data(),
)
def test_encoding_matches_c_order_flattening(radices, data):
    shape = tuple(radices)
    configuration = tuple(data.draw(st.integers(0, r - 1)) for r in radices)
    table = np.arange(np.prod(shape)).reshape(shape)
    code = encode_configurations(np.array([configuration]), shape)
    assert code.shape == (1,)
    assert table.ravel()[code[0]] == table[configuration]
    if len(set(radices)) == 1:
        assert encode_configurations(np.array([configuration]), radices[0])[0] == code[0]


def test_encoding_rejects_values_out_of_range():
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        encode_configurations(np.array([[0, 3]]), 3)


# --------------------------------------------------------------------------------------------
# Power and false-alarm rate, simulated
# --------------------------------------------------------------------------------------------


def rejection_rate(probs, sampler_probs, num_draws, threshold, replicates, seed) -> float:
    counts = np.random.default_rng(seed).multinomial(num_draws, sampler_probs, size=replicates)
    return float(np.mean([chisquare_gof(c, probs).p_value <= threshold for c in counts]))


def test_false_alarm_rate_matches_threshold(table):
    probs = table.ravel()
    rate = rejection_rate(probs, probs, 2_000, 0.05, replicates=1_000, seed=4)
    assert 0.03 <= rate <= 0.07  # 1000 replicates: standard deviation ~0.007


def test_power_draws_is_calibrated(table):
    probs = table.ravel()
    flat_heavy = np.ravel_multi_index(HEAVY_CELL, table.shape)
    delta = 0.02
    wrong = perturbed(table, HEAVY_CELL, delta).ravel()
    for power in (0.5, 0.9):
        num_draws = power_draws(delta, probs[flat_heavy], power=power, num_cells=probs.size)
        rate = rejection_rate(probs, wrong, num_draws, DEFAULT_THRESHOLD, 400, seed=5)
        assert abs(rate - power) < 0.1, (power, rate)  # 400 replicates: sd <= 0.025


def test_power_draws_one_proportion_formula():
    # Two cells: the classical sample size of a two-sided test of one proportion.
    from scipy import stats

    p, delta = 0.1, 0.01
    classical = (
        p * (1 - p) * ((stats.norm.isf(DEFAULT_THRESHOLD / 2) + stats.norm.isf(0.01)) / delta) ** 2
    )
    assert power_draws(delta, p) == pytest.approx(classical, rel=1e-3)
    assert power_draws(delta, p, num_cells=27) > power_draws(delta, p)


def test_power_statement_is_checked_on_the_cells_after_pooling():
    """``catches`` counts the cells left after pooling: a sample enough for two cells but
    not for the 27 of the table fails the statement, however good its fit."""
    delta, p, cells = 0.02, HEAVY_PROBABILITY, Q**N_SITES
    enough = power_draws(delta, p, num_cells=cells)
    assert power_draws(delta, p) < 2 * enough // 3  # enough for two cells
    probs = np.full(cells, (1 - p) / (cells - 1))
    probs[0] = p
    table = probs.reshape((Q,) * N_SITES)
    assert_gof(draw_codes(table, enough, 6), table, catches=(delta, p))
    short = draw_codes(table, 2 * enough // 3, 6)
    with pytest.raises(AssertionError, match=r"over 27 cells \(after pooling\) do not catch"):
        assert_gof(short, table, catches=(delta, p))


# --------------------------------------------------------------------------------------------
# Two samples
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_two_sample_chisquare_same_sampler_passes(table, seed):
    a = draw_codes(table, 40_000, seed)
    b = draw_codes(table, 60_000, seed + 100)
    assert assert_two_sample(a, b) > DEFAULT_THRESHOLD


@pytest.mark.parametrize("seed", SEEDS)
def test_two_sample_chisquare_detects_wrong_sampler(table, seed):
    num_draws, delta = 40_000, 0.02
    # Two samples of N each are as informative as one of N / 2 against an exact table.
    assert num_draws // 2 >= power_draws(delta, HEAVY_PROBABILITY, num_cells=table.size)
    a = draw_codes(table, num_draws, seed)
    b = draw_codes(perturbed(table, HEAVY_CELL, delta), num_draws, seed + 100)
    flat_heavy = np.ravel_multi_index(HEAVY_CELL, table.shape)
    with pytest.raises(
        AssertionError, match=rf"worst cells \(first sample\):\n  code {flat_heavy}"
    ):
        assert_two_sample(a, b, label="wrong sampler")


def test_two_sample_chisquare_pools_rare_codes():
    a = np.array([0] * 50 + [1] * 50 + [7])
    b = np.array([0] * 45 + [1] * 55 + [9, 11])
    result = two_sample_chisquare(a, b)
    assert result.num_cells == 2 and result.dof == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_two_sample_ks(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=40_000), rng.normal(size=40_000)
    assert assert_two_sample(a, b, kind="ks") > DEFAULT_THRESHOLD
    with pytest.raises(AssertionError, match="Kolmogorov-Smirnov"):
        assert_two_sample(a, b + 0.1, kind="ks")


def test_projections_agree_combines_by_bonferroni():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(20_000, 3)), rng.normal(size=(20_000, 3))
    directions = np.eye(3)
    p_value = assert_projections_agree(a, b, directions)
    expected = min(1.0, 3 * min(stats.ks_2samp(a[:, j], b[:, j]).pvalue for j in range(3)))
    assert p_value == pytest.approx(expected)
    shifted = b + np.array([0.0, 0.0, 0.1])  # only the last coordinate's law differs
    with pytest.raises(AssertionError, match=r"Bonferroni over 3 projections.*worst projection 2"):
        assert_projections_agree(a, shifted, directions)
    with pytest.raises(ValueError, match="directions"):
        assert_projections_agree(a, b, np.eye(2))


# --------------------------------------------------------------------------------------------
# Means
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_mean_z_test(seed):
    rng = np.random.default_rng(seed)
    probabilities = np.array([0.5, 0.2, 0.05])
    draws = rng.random((100_000, 3)) < probabilities
    result = mean_z_test(draws, probabilities)
    assert result.z.shape == (3,) and result.p_value > DEFAULT_THRESHOLD
    mean_z_test(draws[:, 0], 0.5)
    # An error of 0.01 in a mean of 0.5 is ~6 standard errors at 100k draws.
    with pytest.raises(AssertionError, match="worst coordinate 0"):
        mean_z_test(draws, probabilities + np.array([0.01, 0.0, 0.0]))


def test_mean_z_test_constant_draws():
    assert mean_z_test(np.ones(10), 1.0).p_value == 1.0
    with pytest.raises(AssertionError, match="mean z-test failed: p = 0 .*z = \\+inf"):
        mean_z_test(np.ones(10), 0.9)
