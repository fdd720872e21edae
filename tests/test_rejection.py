"""Analytic exactness of one speculative-rejection step (docs/algorithm.md section 3).

For random small mu and nu over a finite set, the law of "draw x' ~ nu, accept with
min(1, mu/nu), otherwise run i.i.d. residual trials y ~ mu accepted with max(0, 1 - nu/mu)
and output the first accepted one" is computed exactly from the library's own acceptance
probabilities and compared with mu.  No sampling: the tolerance is float rounding.
"""

import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from numpyro_autospec.rejection import (
    batch_size,
    residual_log_accept_prob,
    speculation_log_accept_prob,
)

unit = st.floats(0.0, 1.0, width=32, allow_subnormal=False)
simplex = arrays(np.float64, st.integers(2, 12), elements=unit).filter(lambda w: w.sum() > 1e-3)


def step_law(mu, nu, residual_prob=residual_log_accept_prob):
    """Exact law of one speculative rejection step with the given acceptance rules."""
    mu = np.asarray(jnp.asarray(mu, jnp.float32), np.float64)
    nu = np.asarray(jnp.asarray(nu, jnp.float32), np.float64)
    log_mu = jnp.log(jnp.asarray(mu, jnp.float32))
    log_nu = jnp.log(jnp.asarray(nu, jnp.float32))
    accept = np.exp(np.asarray(speculation_log_accept_prob(log_mu, log_nu), np.float64))
    accept = np.where(nu > 0, accept, 0.0)
    direct = nu * accept  # output density of an accepted speculation
    trial = np.where(mu > 0, mu * np.exp(np.asarray(residual_prob(log_mu, log_nu))), 0.0)
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
    if mu.sum() == 0 or nu.sum() == 0:
        return
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
