"""Analytic exactness of one speculative-rejection step (docs/algorithm.md section 3), and the
row-wise categorical draw of a speculation (goodness of fit against each row's law).

For random small mu and nu over a finite set, the law of "draw x' ~ nu, accept with
min(1, mu/nu), otherwise run i.i.d. residual trials y ~ mu accepted with max(0, 1 - nu/mu)
and output the first accepted one" is computed exactly from the library's own acceptance
probabilities and compared with mu.  No sampling: the tolerance is float rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from numpyro_autospec._core.rejection import (
    batch_size,
    categorical_rows,
    residual_log_accept_prob,
    speculation_log_accept_prob,
)
from tests.gof import assert_gof

unit = st.floats(0.0, 1.0, width=32, allow_subnormal=False)
simplex = arrays(np.float64, st.integers(2, 12), elements=unit).filter(lambda w: w.sum() > 1e-3)


def step_law(mu, nu, residual_prob=residual_log_accept_prob):
    """Exact law of one speculative rejection step with the given acceptance rules."""
    mu = np.asarray(jnp.asarray(mu, jnp.float32), np.float64)
    nu = np.asarray(jnp.asarray(nu, jnp.float32), np.float64)
    log_mu = jnp.log(jnp.asarray(mu, jnp.float32))
    log_nu = jnp.log(jnp.asarray(nu, jnp.float32))
    accept = np.exp(np.asarray(speculation_log_accept_prob(log_mu, log_nu), np.float64))
    # a cell is possible where its float32 log is finite (XLA flushes float32 subnormals such
    # as 4.6e-43 to zero, so their log is -inf; the cell's mass is far below the tolerance)
    accept = np.where(np.isfinite(np.asarray(log_nu)), accept, 0.0)
    direct = nu * accept  # output density of an accepted speculation
    possible = np.isfinite(np.asarray(log_mu))
    trial = np.where(possible, mu * np.exp(np.asarray(residual_prob(log_mu, log_nu))), 0.0)
    # the first accepted trial of an i.i.d. sequence has law trial / trial.sum()
    residual_law = trial / trial.sum() if trial.sum() > 0 else np.zeros_like(mu)
    return direct + (1.0 - direct.sum()) * residual_law


def pair(data):
    mu = data.draw(simplex)
    nu = data.draw(
        arrays(np.float64, mu.shape, elements=st.floats(0.0, 1.0)).filter(lambda w: w.sum() > 1e-3)
    )
    return mu / mu.sum(), nu / nu.sum()


@given(st.data())
def test_one_step_law_is_exactly_mu(data):
    mu, nu = pair(data)
    np.testing.assert_allclose(step_law(mu, nu), mu, atol=2e-6)


@given(st.data())
def test_one_step_law_with_zero_probability_cells(data):
    mu, nu = pair(data)
    mu[0], nu[-1] = 0.0, 0.0  # impossible under mu / impossible under the speculation
    assume(mu.sum() > 0 and nu.sum() > 0)
    mu, nu = mu / mu.sum(), nu / nu.sum()
    np.testing.assert_allclose(step_law(mu, nu), mu, atol=2e-6)


def test_wrong_residual_rule_is_caught():
    """Accepting residual trials with min(1, mu/nu) (the speculation's rule) instead of
    max(0, 1 - nu/mu) breaks the law; the check sees it."""
    mu, nu = np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.4, 0.4])
    wrong = step_law(mu, nu, residual_prob=speculation_log_accept_prob)
    assert np.abs(wrong - mu).max() > 0.05


def test_residual_probability_numerics():
    log_mu = jnp.log(jnp.array([0.5, 0.5, 1e-30, 0.3]))
    log_nu = jnp.log(jnp.array([0.5 * (1 - 1e-7), 0.9, 0.1, 0.0]))
    p = np.exp(np.asarray(residual_log_accept_prob(log_mu, log_nu)))
    assert p[0] > 0 and p[0] < 1e-6  # -expm1 keeps tiny differences
    assert p[1] == 0.0 and p[2] == 0.0  # nu >= mu: never accepted
    assert p[3] == 1.0  # impossible under nu: always accepted


def test_batch_sizes_grow_geometrically():
    assert [batch_size(r, 1.0) for r in range(5)] == [1, 2, 4, 8, 16]
    assert [batch_size(r, 0.5) for r in range(4)] == [1, 2, 3, 4]


#: rows of categorical_rows' test: a random law with a zero cell, the same shifted by a constant
#: (log-probabilities up to a constant), a law with a rare cell, and a point mass
CATEGORICAL_LAWS = np.array(
    [
        [0.05, 0.30, 0.0, 0.25, 0.15, 0.25],
        [0.05, 0.30, 0.0, 0.25, 0.15, 0.25],
        [0.002, 0.498, 0.1, 0.1, 0.1, 0.2],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    ]
)
#: draws of each row: power 0.99 against an absolute error of 0.01 in any cell of a row of 5
#: or 6 cells (the noncentrality ``N delta^2 / (p (1 - p))`` is smallest at p = 0.5:
#: ``power_draws(0.01, 0.5, num_cells=6)`` is 124 822)
CATEGORICAL_DRAWS = 125_000


def draw_rows(sampler, laws: np.ndarray, shift: np.ndarray, seed: int) -> np.ndarray:
    """``CATEGORICAL_DRAWS`` draws of each row: one call on the rows tiled (draws x rows)."""
    log_rows = jnp.log(jnp.asarray(laws, jnp.float32)) + jnp.asarray(shift, jnp.float32)[:, None]
    tiled = jnp.broadcast_to(log_rows, (CATEGORICAL_DRAWS,) + log_rows.shape)
    return np.asarray(sampler(jax.random.key(seed), tiled.reshape(-1, laws.shape[1]))).reshape(
        CATEGORICAL_DRAWS, len(laws)
    )


def test_categorical_rows_draws_each_row_from_its_law():
    """Every row's draws follow its law (chi-square, p > 1e-4), a row given up to a constant
    too, and a zero-probability cell is never drawn; the point mass (the last row, one cell:
    nothing for a chi-square to test) is drawn every time."""
    shift = np.array([0.0, 3.7, -2.0, 0.0])
    draws = draw_rows(categorical_rows, CATEGORICAL_LAWS, shift, seed=0)
    for row, law in enumerate(CATEGORICAL_LAWS[:-1]):
        assert_gof(draws[:, row], law, label=f"row {row}", catches=(0.01, 0.5))
    assert not np.any(draws[:, 0] == 2) and np.all(draws[:, 3] == 5)


def test_categorical_rows_test_catches_an_unscaled_inversion():
    """The same check fails on an inversion that forgets to scale the uniform by the row's
    total (the weights ``exp(l - max l)`` sum to 1 only for a point mass, so the uniform
    covers only the first part of the row)."""

    def unscaled(key, log_rows):
        cumulative = jnp.cumsum(jnp.exp(log_rows - log_rows.max(-1, keepdims=True)), axis=-1)
        uniform = jax.random.uniform(key, log_rows.shape[:-1])
        index = jnp.sum(cumulative <= uniform[..., None], axis=-1)
        return jnp.minimum(index, log_rows.shape[-1] - 1)

    draws = draw_rows(unscaled, CATEGORICAL_LAWS, np.zeros(4), seed=0)
    with pytest.raises(AssertionError, match="chi-square goodness of fit failed"):
        assert_gof(draws[:, 0], CATEGORICAL_LAWS[0], label="unscaled inversion")
