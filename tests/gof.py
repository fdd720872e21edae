"""Goodness-of-fit harness for the sampler tests.

Every exactness test in this suite reduces to one of three questions, each answered by a
classical test from :mod:`scipy.stats`:

* **Does a sample follow a known finite table?**  :func:`chisquare_gof` / :func:`assert_gof`
  (Pearson's chi-square test, :func:`scipy.stats.chisquare`).
* **Do two samplers agree?**  :func:`two_sample_chisquare` / :func:`assert_two_sample`
  (chi-square test of homogeneity, :func:`scipy.stats.chi2_contingency`, or the two-sample
  Kolmogorov-Smirnov test, :func:`scipy.stats.ks_2samp`, for real-valued draws; on several
  one-dimensional projections of vector draws, :func:`assert_projections_agree`, one test
  whose p-value is the Bonferroni combination of the projections').
* **Is a sample mean right?**  :func:`mean_z_test`, a z-test with Monte Carlo standard error
  ``std / sqrt(N)`` for iid draws, used for sufficient statistics of targets too large to
  enumerate.

Threshold convention
--------------------
A test **passes when its p-value is strictly greater than** ``threshold`` (default ``1e-4``),
and the ``assert_*`` helpers raise :class:`AssertionError` when ``p_value <= threshold``.
With fixed seeds the outcome is deterministic; the threshold is the false-alarm rate a test
would have over random seeds.  A test should also state its *power*: how large an error it
would catch.  :func:`power_draws` gives the number of draws needed to detect an absolute error
``delta`` in one probability ``p``.

Imports: ``from tests.gof import assert_gof, encode_configurations`` (the repository root is
on ``sys.path`` through ``pythonpath = ["."]`` in ``pyproject.toml``).
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np
from scipy import optimize, stats

__all__ = [
    "DEFAULT_THRESHOLD",
    "GofResult",
    "ZTestResult",
    "assert_gof",
    "assert_projections_agree",
    "assert_two_sample",
    "chisquare_gof",
    "encode_configurations",
    "mean_z_test",
    "power_draws",
    "two_sample_chisquare",
]

DEFAULT_THRESHOLD = 1e-4
"""A test passes when ``p_value > DEFAULT_THRESHOLD``."""

_PROBABILITY_SUM_TOLERANCE = 1e-4
_WORST_CELLS_SHOWN = 5


class GofResult(NamedTuple):
    """Outcome of a chi-square test after pooling sparse cells.

    Attributes:
        statistic: Pearson's chi-square statistic (``inf`` when a zero-probability cell was hit).
        dof: degrees of freedom of the reference chi-square distribution.
        p_value: probability, under the null hypothesis, of a statistic at least this large.
        num_cells: number of cells after pooling (the pooled cell counts as one).
    """

    statistic: float
    dof: int
    p_value: float
    num_cells: int


class ZTestResult(NamedTuple):
    """Outcome of :func:`mean_z_test`.

    Attributes:
        z: per-coordinate z-scores ``(mean - expected_mean) / standard_error``.
        p_value: Bonferroni-combined two-sided p-value over the coordinates.
        mean: per-coordinate sample mean.
        standard_error: per-coordinate Monte Carlo standard error ``std / sqrt(N)``.
    """

    z: np.ndarray
    p_value: float
    mean: np.ndarray
    standard_error: np.ndarray


class _Cells(NamedTuple):
    """Observed and expected counts per cell, with a label for each cell (for messages)."""

    observed: np.ndarray
    expected: np.ndarray
    labels: list[str]


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------


def _as_probabilities(expected_probs) -> np.ndarray:
    """Validate a probability table (any shape) and return it normalized, in float64."""
    probs = np.asarray(expected_probs, dtype=np.float64)
    if probs.size == 0:
        raise ValueError("expected_probs is empty")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError("expected_probs must be finite and non-negative")
    total = probs.sum()
    if abs(total - 1.0) > _PROBABILITY_SUM_TOLERANCE:
        raise ValueError(f"expected_probs sums to {total!r}, not 1")
    return probs / total


def _as_codes(codes, name: str = "codes") -> np.ndarray:
    """Validate a 1-D array of non-negative integer cell codes."""
    array = np.asarray(codes)
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of integer cell codes, got shape {array.shape}; "
            "encode configurations first with encode_configurations(x, q)"
        )
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.equal(np.mod(array, 1), 0)):
            raise ValueError(f"{name} must hold integers")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return array


def _observed_counts(
    observed_codes_or_counts, probs: np.ndarray, kind: Literal["auto", "codes", "counts"]
) -> np.ndarray:
    """Turn codes or counts into counts with the (flattened) shape of ``probs``."""
    observed = np.asarray(observed_codes_or_counts)
    if kind == "auto":
        kind = "counts" if observed.shape == probs.shape else "codes"
    if kind == "counts":
        if observed.shape != probs.shape:
            raise ValueError(f"counts have shape {observed.shape}, table has {probs.shape}")
        counts = np.asarray(observed, dtype=np.float64).ravel()
        if np.any(counts < 0) or not np.all(np.equal(np.mod(counts, 1), 0)):
            raise ValueError("counts must be non-negative integers")
        return counts
    if kind != "codes":
        raise ValueError(f"kind must be 'auto', 'codes' or 'counts', not {kind!r}")
    codes = _as_codes(observed)
    if codes.size and codes.max() >= probs.size:
        raise ValueError(f"code {codes.max()} is out of range for a table of {probs.size} cells")
    return np.bincount(codes, minlength=probs.size).astype(np.float64)


def _cell_label(index: int, shape: tuple[int, ...]) -> str:
    if len(shape) <= 1:
        return f"cell {index}"
    return f"cell {tuple(int(i) for i in np.unravel_index(index, shape))}"


def _pooled_indices(expected: np.ndarray, min_expected: float) -> tuple[np.ndarray, np.ndarray]:
    """Split cell indices into (kept, pooled) so that every cell left has enough expectation.

    Every cell with expected count below ``min_expected`` is pooled; if the pooled cell itself
    stays below ``min_expected``, the smallest remaining cells join it until it does not (or
    until a single cell is left).  ``pooled`` is empty when no pooling is needed.
    """
    order = np.argsort(expected, kind="stable")
    expected_sorted = expected[order]
    num_small = int(np.searchsorted(expected_sorted, min_expected, side="left"))
    while 0 < num_small < order.size and expected_sorted[:num_small].sum() < min_expected:
        num_small += 1
    if num_small <= 1:
        return np.arange(expected.size), np.array([], dtype=np.int64)
    return np.sort(order[num_small:]), order[:num_small]


def _pool(cells: _Cells, min_expected: float) -> _Cells:
    """Pool the sparse cells of ``cells`` into one (see :func:`_pooled_indices`)."""
    kept, pooled = _pooled_indices(cells.expected, min_expected)
    if pooled.size == 0:
        return cells
    observed = np.append(cells.observed[kept], cells.observed[pooled].sum())
    expected = np.append(cells.expected[kept], cells.expected[pooled].sum())
    excess = cells.observed[pooled] - cells.expected[pooled]
    largest = ", ".join(cells.labels[i] for i in pooled[np.argsort(-excess, kind="stable")[:3]])
    pooled_label = f"pooled ({pooled.size} cells; largest excess: {largest})"
    return _Cells(observed, expected, [cells.labels[i] for i in kept] + [pooled_label])


def _worst_cells(cells: _Cells, how_many: int = _WORST_CELLS_SHOWN) -> str:
    """Describe the cells with the largest Pearson residuals."""
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = (cells.observed - cells.expected) / np.sqrt(cells.expected)
    residual = np.where(cells.expected > 0, residual, np.inf)
    lines = []
    for i in np.argsort(-np.abs(residual), kind="stable")[:how_many]:
        lines.append(
            f"  {cells.labels[i]}: observed {cells.observed[i]:.0f}, "
            f"expected {cells.expected[i]:.1f}, residual {residual[i]:+.2f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# One sample against a table
# --------------------------------------------------------------------------------------------


def _gof_cells(
    observed_codes_or_counts, expected_probs, min_expected: float, kind
) -> tuple[_Cells, bool]:
    """Cells for the one-sample test, and whether a zero-probability cell was observed."""
    probs = _as_probabilities(expected_probs)
    counts = _observed_counts(observed_codes_or_counts, probs, kind)
    flat_probs = probs.ravel()
    impossible_hit = bool(np.any(counts[flat_probs == 0] > 0))
    support = np.flatnonzero(flat_probs > 0)
    labels = [_cell_label(int(i), probs.shape) for i in support]
    cells = _Cells(counts[support], counts.sum() * flat_probs[support], labels)
    if impossible_hit:
        hits = np.flatnonzero((flat_probs == 0) & (counts > 0))
        cells = _Cells(
            np.append(cells.observed, counts[hits]),
            np.append(cells.expected, np.zeros(hits.size)),
            labels + [f"{_cell_label(int(i), probs.shape)} (probability 0)" for i in hits],
        )
    return cells, impossible_hit


def chisquare_gof(
    observed_codes_or_counts,
    expected_probs,
    *,
    min_expected: float = 5.0,
    kind: Literal["auto", "codes", "counts"] = "auto",
) -> GofResult:
    """Pearson chi-square test of a sample against a known probability table.

    Null hypothesis: the draws are iid from ``expected_probs``.

    Args:
        observed_codes_or_counts: either a 1-D integer array of cell codes (one per draw, in
            ``range(expected_probs.size)``, C-order flat index into the table; see
            :func:`encode_configurations`), or an array of counts with exactly the shape of
            ``expected_probs``.  With ``kind="auto"`` an array with the table's shape is read
            as counts and anything else as codes.
        expected_probs: the exact table, any shape, non-negative, summing to 1 (to 1e-4; it is
            renormalized in float64).
        min_expected: cells whose expected count is below this are pooled into one cell, so
            that the chi-square approximation holds (Cochran's rule).
        kind: ``"auto"``, ``"codes"`` or ``"counts"``.

    Returns:
        A :class:`GofResult`.  A draw in a zero-probability cell gives ``statistic=inf`` and
        ``p_value=0``.  Zero-probability cells that were never hit are dropped.  With a
        single cell left there is nothing to test and ``p_value=1``.
    """
    cells, impossible_hit = _gof_cells(observed_codes_or_counts, expected_probs, min_expected, kind)
    if impossible_hit:
        return GofResult(math.inf, max(len(cells.labels) - 1, 0), 0.0, len(cells.labels))
    pooled = _pool(cells, min_expected)
    num_cells = pooled.observed.size
    if num_cells < 2 or pooled.observed.sum() == 0:
        return GofResult(0.0, 0, 1.0, num_cells)
    result = stats.chisquare(pooled.observed, pooled.expected)
    return GofResult(float(result.statistic), num_cells - 1, float(result.pvalue), num_cells)


def assert_gof(
    samples,
    probs,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    label: str = "",
    min_expected: float = 5.0,
    kind: Literal["auto", "codes", "counts"] = "auto",
    catches: tuple[float, float] | None = None,
) -> GofResult:
    """Assert that ``samples`` (codes or counts) follow the table ``probs``.

    Runs :func:`chisquare_gof` and raises :class:`AssertionError` when
    ``p_value <= threshold``, with the statistic, the p-value and the cells with the largest
    Pearson residuals in the message.  Returns the :class:`GofResult` otherwise.

    ``catches=(delta, p)`` is the test's power statement, checked on the test that ran: the
    draws must be at least :func:`power_draws` ``(delta, p, num_cells=...)`` with the cells
    left after pooling, i.e. power 0.99 at ``threshold`` against an absolute error ``delta``
    in a cell of probability ``p``; an :class:`AssertionError` otherwise.
    """
    result = chisquare_gof(samples, probs, min_expected=min_expected, kind=kind)
    cells, impossible_hit = _gof_cells(samples, probs, min_expected, kind)
    if catches is not None:
        delta, p = catches
        needed = power_draws(delta, p, threshold=threshold, num_cells=max(result.num_cells, 2))
        draws = int(cells.observed.sum())
        assert draws >= needed, (
            f"{label or 'goodness of fit'}: {draws} draws over {result.num_cells} cells (after "
            f"pooling) do not catch an error of {delta} in a cell of probability {p} at power "
            f"0.99: that needs {needed}"
        )
    if result.p_value > threshold:
        return result
    if not impossible_hit:
        cells = _pool(cells, min_expected)
    prefix = f"{label}: " if label else ""
    raise AssertionError(
        f"{prefix}chi-square goodness of fit failed: statistic {result.statistic:.2f} on "
        f"{result.dof} dof, p = {result.p_value:.3g} <= {threshold:g} "
        f"({cells.observed.sum():.0f} draws, {result.num_cells} cells)\n"
        f"worst cells:\n{_worst_cells(cells)}"
    )


def encode_configurations(x, q) -> np.ndarray:
    """Mixed-radix code of each configuration: row ``x[k]`` of ``int[N, n]`` -> one integer.

    Site 0 is the most significant digit, so the code of ``x[k]`` is its flat index in a
    C-order table of shape ``(q,) * n`` (``q`` an int) or ``tuple(q)`` (one radix per site):
    ``encode_configurations(x, q)[k] == np.ravel_multi_index(tuple(x[k]), shape)``, and
    ``table.ravel()[code]`` is the probability of ``x[k]``.

    Raises ``ValueError`` for a value outside ``range(q)`` or a table too large to index.
    """
    configurations = np.asarray(x)
    if configurations.ndim != 2:
        raise ValueError(f"x must have shape (N, n), got {configurations.shape}")
    num_sites = configurations.shape[1]
    shape = (int(q),) * num_sites if np.ndim(q) == 0 else tuple(int(r) for r in q)
    if len(shape) != num_sites:
        raise ValueError(f"{len(shape)} radices for {num_sites} sites")
    return np.ravel_multi_index(tuple(configurations.astype(np.int64).T), shape).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Two samples
# --------------------------------------------------------------------------------------------


def _two_sample_cells(codes_a, codes_b, min_count: float) -> tuple[np.ndarray, list[str]]:
    """2 x K contingency table over the observed codes, sparse columns pooled.

    A column is sparse when its smaller expected count under homogeneity,
    ``column_total * min(N_a, N_b) / (N_a + N_b)``, is below ``min_count``.
    """
    a = _as_codes(codes_a, "codes_a")
    b = _as_codes(codes_b, "codes_b")
    if a.size == 0 or b.size == 0:
        raise ValueError("both samples must be non-empty")
    values, inverse = np.unique(np.concatenate([a, b]), return_inverse=True)
    table = np.zeros((2, values.size))
    np.add.at(table[0], inverse[: a.size], 1)
    np.add.at(table[1], inverse[a.size :], 1)
    smaller_share = min(a.size, b.size) / (a.size + b.size)
    kept, pooled = _pooled_indices(table.sum(axis=0) * smaller_share, min_count)
    labels = [f"code {values[i]}" for i in kept]
    if pooled.size == 0:
        return table, labels
    merged = np.concatenate([table[:, kept], table[:, pooled].sum(axis=1, keepdims=True)], axis=1)
    return merged, labels + [f"pooled ({pooled.size} codes)"]


def two_sample_chisquare(codes_a, codes_b, *, min_count: float = 5.0) -> GofResult:
    """Chi-square test of homogeneity: are two samples of integer codes from one distribution?

    Null hypothesis: ``codes_a`` and ``codes_b`` are iid draws from the same (unknown)
    distribution.  Builds the 2 x K contingency table over the observed codes, pools columns
    whose expected count (for the smaller sample) is below ``min_count``, and runs
    :func:`scipy.stats.chi2_contingency` without continuity correction.  Returns a
    :class:`GofResult`; ``p_value=1`` when a single column is left.
    """
    table, _ = _two_sample_cells(codes_a, codes_b, min_count)
    num_cells = table.shape[1]
    if num_cells < 2:
        return GofResult(0.0, 0, 1.0, num_cells)
    result = stats.chi2_contingency(table, correction=False)
    return GofResult(float(result.statistic), int(result.dof), float(result.pvalue), num_cells)


def assert_two_sample(
    a,
    b,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    kind: Literal["chisquare", "ks"] = "chisquare",
    label: str = "",
    min_count: float = 5.0,
) -> float:
    """Assert that two samples come from the same distribution; return the p-value.

    ``kind="chisquare"``: :func:`two_sample_chisquare` on 1-D integer codes.
    ``kind="ks"``: two-sample Kolmogorov-Smirnov test (:func:`scipy.stats.ks_2samp`) on 1-D
    real-valued draws; it is conservative (loses power) on discrete data, so use the
    chi-square test there.  Raises :class:`AssertionError` when ``p_value <= threshold``.
    """
    prefix = f"{label}: " if label else ""
    if kind == "chisquare":
        result = two_sample_chisquare(a, b, min_count=min_count)
        if result.p_value > threshold:
            return result.p_value
        table, labels = _two_sample_cells(a, b, min_count)
        expected = stats.contingency.expected_freq(table)[0]
        cells = _Cells(table[0], expected, labels)
        raise AssertionError(
            f"{prefix}two-sample chi-square failed: statistic {result.statistic:.2f} on "
            f"{result.dof} dof, p = {result.p_value:.3g} <= {threshold:g} "
            f"({table[0].sum():.0f} vs {table[1].sum():.0f} draws)\n"
            f"worst cells (first sample):\n{_worst_cells(cells)}"
        )
    if kind == "ks":
        first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if first.ndim != 1 or second.ndim != 1:
            raise ValueError("the KS test takes 1-D samples")
        result = stats.ks_2samp(first, second)
        if result.pvalue > threshold:
            return float(result.pvalue)
        raise AssertionError(
            f"{prefix}two-sample Kolmogorov-Smirnov failed: D = {result.statistic:.4f}, "
            f"p = {result.pvalue:.3g} <= {threshold:g} ({first.size} vs {second.size} draws; "
            f"means {first.mean():.4g} vs {second.mean():.4g})"
        )
    raise ValueError(f"kind must be 'chisquare' or 'ks', not {kind!r}")


def assert_projections_agree(
    a, b, directions, *, threshold: float = DEFAULT_THRESHOLD, label: str = ""
) -> float:
    """Assert that two samples of vectors agree on every projection; return the p-value.

    ``a`` is ``[N_a, d]``, ``b`` is ``[N_b, d]`` and ``directions`` ``[k, d]``: a two-sample
    Kolmogorov-Smirnov test of ``a @ u`` against ``b @ u`` for each direction ``u``, combined
    by Bonferroni into one test, ``p = min(1, k * min_j p_j)``, so that ``threshold`` is the
    false-alarm rate of the whole check (``k`` projections each at ``threshold`` would alarm
    at up to ``k * threshold``).  Raises :class:`AssertionError` when ``p <= threshold``,
    naming the worst projection.
    """
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    axes = np.atleast_2d(np.asarray(directions, dtype=np.float64))
    if first.ndim != 2 or second.ndim != 2 or axes.shape[1] != first.shape[1]:
        raise ValueError(
            f"samples [N, d] and directions [k, d] expected, got {first.shape}, "
            f"{second.shape} and {axes.shape}"
        )
    results = [stats.ks_2samp(first @ u, second @ u) for u in axes]
    p_values = np.array([result.pvalue for result in results])
    p_value = float(min(1.0, len(axes) * p_values.min()))
    if p_value > threshold:
        return p_value
    worst = int(np.argmin(p_values))
    prefix = f"{label}: " if label else ""
    raise AssertionError(
        f"{prefix}projected Kolmogorov-Smirnov failed: p = {p_value:.3g} <= {threshold:g} "
        f"(Bonferroni over {len(axes)} projections; {first.shape[0]} vs {second.shape[0]} "
        f"draws); worst projection {worst} ({axes[worst].round(3).tolist()}): "
        f"D = {results[worst].statistic:.4f}, p = {p_values[worst]:.3g}"
    )


# --------------------------------------------------------------------------------------------
# Means and power
# --------------------------------------------------------------------------------------------


def mean_z_test(draws, expected_mean, *, threshold: float = DEFAULT_THRESHOLD) -> ZTestResult:
    """z-test of the sample mean of iid draws against its exact value.

    For draws of shape ``(N,)`` or ``(N, d)``, each coordinate gets
    ``z = (mean - expected_mean) / (std / sqrt(N))`` (``std`` with ``ddof=1``), the Monte Carlo
    standard error of iid draws; the draws must be independent (one per chain, or thinned),
    not an autocorrelated chain.  The per-coordinate two-sided p-values are combined by
    Bonferroni, ``p = min(1, d * min_j p_j)``.  Meant for sufficient statistics (counts,
    magnetization, pairwise agreements) of targets too large to enumerate; by the central limit
    theorem it needs N large (thousands).

    Raises :class:`AssertionError` when ``p_value <= threshold``; returns the
    :class:`ZTestResult` otherwise.
    """
    values = np.asarray(draws, dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[0] < 2:
        raise ValueError(f"draws must have shape (N,) or (N, d) with N >= 2, got {values.shape}")
    matrix = values.reshape(values.shape[0], -1)
    target = np.broadcast_to(np.asarray(expected_mean, dtype=np.float64), matrix.shape[1:])
    mean = matrix.mean(axis=0)
    standard_error = matrix.std(axis=0, ddof=1) / math.sqrt(matrix.shape[0])
    difference = mean - target
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(standard_error > 0, difference / standard_error, np.inf * difference)
    z = np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf)
    p_per_coordinate = 2.0 * stats.norm.sf(np.abs(z))
    p_value = float(min(1.0, z.size * p_per_coordinate.min()))
    result = ZTestResult(z, p_value, mean, standard_error)
    if p_value <= threshold:
        worst = int(np.argmax(np.abs(z)))
        raise AssertionError(
            f"mean z-test failed: p = {p_value:.3g} <= {threshold:g} over {z.size} "
            f"coordinate(s), {matrix.shape[0]} draws; worst coordinate {worst}: mean "
            f"{mean[worst]:.6g} vs exact {target[worst]:.6g}, standard error "
            f"{standard_error[worst]:.3g}, z = {z[worst]:+.2f}"
        )
    return result


def power_draws(
    delta: float,
    p: float,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    power: float = 0.99,
    num_cells: int = 2,
) -> int:
    """Draws needed for :func:`chisquare_gof` to catch an absolute error ``delta`` in a cell.

    Suppose the sampler puts mass ``p + delta`` on a cell of exact probability ``p`` and
    rescales the other cells proportionally.  With ``N`` draws Pearson's statistic is then
    approximately noncentral chi-square with ``dof = num_cells - 1`` and noncentrality

    .. math::  \\lambda = N \\, \\delta^2 / (p (1 - p)),

    the smallest noncentrality any error of ``delta`` in that cell can have.  This returns
    the smallest ``N`` with ``P(ncx2(dof, lambda) > chi2.isf(threshold, dof)) >= power``.  With
    ``num_cells=2`` it is the classical sample size of a two-sided test of one proportion,
    ``N ~ p (1 - p) ((z_{1-threshold/2} + z_{power}) / delta)^2``.  Power drops with the
    number of cells, so pass the number of cells left after pooling (``GofResult.num_cells``).
    """
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if not 0 < abs(delta) < 1 or not 0 <= p + delta <= 1:
        raise ValueError("p + delta must be a probability and delta non-zero")
    if num_cells < 2:
        raise ValueError("num_cells must be at least 2")
    dof = num_cells - 1
    critical = stats.chi2.isf(threshold, dof)

    def power_gap(noncentrality: float) -> float:
        return stats.ncx2.sf(critical, dof, noncentrality) - power

    upper = 1.0
    while power_gap(upper) < 0:
        upper *= 2.0
    noncentrality = optimize.brentq(power_gap, 0.0, upper, xtol=1e-10, rtol=1e-12)
    return int(math.ceil(noncentrality * p * (1.0 - p) / delta**2))
