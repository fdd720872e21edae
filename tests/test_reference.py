"""The reference sampler (the executable specification) is exact.

Goodness-of-fit against exact answers, fixed seeds, threshold p > 1e-4 (tests/gof.py):

Each test runs the paper's recursion (``PAPER``: recursion blocks only) and the default
``autospec`` root (``WINDOWS``: block-verified windows, and a recursion block after a window
that kept little; the knobs are set so that both branches occur at n = 4):

* a random joint table, n = 4 sites, q = 3 values: 40 000 draws, chi-square over all 81
  cells (power: an absolute error of 0.01 in a cell of probability ~0.05 is detected, see
  ``power_draws``);
* an inconsistent oracle with a fixed order: the law is prod_k p(x_sigma(k) | x_sigma(<k));
* infilling: some sites observed, the law is the exact conditional of the others.

The same module shows the harness failing on a deliberately wrong sampler (residual trials
accepted unconditionally, i.e. the residual law replaced by mu itself).
"""

import jax
import numpy as np
import pytest

import numpyro_autospec.reference as reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.oracles import PerturbedOracle, TableOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.gof import assert_gof, chisquare_gof, encode_configurations, power_draws

N, Q = 4, 3
PAPER = SamplerConfig(root_windows=False)
WINDOWS = SamplerConfig(window=2, min_window=1, floor=4, fallback=3)
CONFIGS = {"paper": PAPER, "windows": WINDOWS}


def random_table(seed, n=N, q=Q, concentration=0.6):
    rng = np.random.default_rng(seed)
    return TableOracle(np.log(rng.dirichlet(np.full(q**n, concentration))).reshape((q,) * n))


def table_probs(log_probs):
    return np.exp(np.asarray(log_probs, np.float64)).ravel()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_on_random_table(name):
    oracle = random_table(0)
    probs = table_probs(oracle.log_probs)
    assert power_draws(0.01, 0.05) <= 40_000
    values, rounds, _ = reference.sample_many(
        AnyOrderProcess(oracle, N, Q), jax.random.PRNGKey(1), 40_000, CONFIGS[name]
    )
    assert_gof(encode_configurations(values, Q), probs, threshold=1e-4, label=name)
    assert rounds.mean() < N + 3  # mostly accepted speculations


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_for_inconsistent_oracle_fixed_order(name):
    order = np.array([2, 0, 3, 1])
    oracle = PerturbedOracle(random_table(1), 0.5, jax.random.PRNGKey(2))
    probs = table_probs(oracle.sequential_log_probs(order))
    values, _, _ = reference.sample_many(
        AnyOrderProcess(oracle, N, Q, order=order), jax.random.PRNGKey(3), 8_000, CONFIGS[name]
    )
    assert_gof(encode_configurations(values, Q), probs, threshold=1e-4, label="inconsistent")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_for_infilling(name):
    oracle = random_table(2)
    mask = np.array([True, False, True, False])
    observed = np.array([2, 0, 1, 0])
    probs = table_probs(oracle.conditional_log_probs(observed, mask))
    values, _, _ = reference.sample_many(
        AnyOrderProcess(oracle, N, Q, observed_values=observed, observed_mask=mask),
        jax.random.PRNGKey(4),
        8_000,
        CONFIGS[name],
    )
    assert (values[:, mask] == observed[mask]).all()
    assert_gof(encode_configurations(values, Q), probs, threshold=1e-4, label="infilling")


def test_harness_catches_a_wrong_sampler(monkeypatch):
    """Residual trials accepted unconditionally: the output law is
    min(mu, nu) + TV * mu instead of mu.  The same test must reject it."""
    monkeypatch.setattr(reference, "residual_accepts", lambda key, log_mu, log_nu: True)
    reference._jitted.cache_clear()
    oracle = random_table(0)
    process = AnyOrderProcess(oracle, N, Q)  # a new process: a fresh jit cache
    values, _, _ = reference.sample_many(process, jax.random.PRNGKey(1), 8_000, PAPER)
    result = chisquare_gof(encode_configurations(values, Q), table_probs(oracle.log_probs))
    assert result.p_value <= 1e-4
    reference._jitted.cache_clear()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_draws_do_not_depend_on_growth_rate(name):
    process = AnyOrderProcess(random_table(5), N, Q)
    key = jax.random.PRNGKey(6)
    for k in jax.random.split(key, 20):
        a = reference.sample(process, k, CONFIGS[name]._replace(growth=1.0))
        b = reference.sample(process, k, CONFIGS[name]._replace(growth=0.25))
        np.testing.assert_array_equal(a.value, b.value)


def test_sequential_costs_n_rounds_and_queries():
    process = AnyOrderProcess(random_table(5), N, Q)
    draw = reference.sample(process, jax.random.PRNGKey(0), SamplerConfig(method="sequential"))
    assert (draw.rounds, draw.queries) == (N, N)
