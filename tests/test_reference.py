"""The reference sampler (the executable specification) is exact.

Goodness-of-fit against exact answers, fixed seeds, threshold p > 1e-4 (tests/gof.py):

Each test runs the paper's recursion (``PAPER``: recursion blocks only) and the default
``autospec`` root (``WINDOWS``: block-verified windows, and a recursion block after a window
that kept little; the knobs are set so that both branches occur at n = 4):

* a random joint table, n = 4 sites, q = 3 values: 40 000 draws, chi-square over all 81
  cells (power: an absolute error of 0.012 in a cell of probability ~0.05 is detected at power
  0.99 with 81 cells, see ``power_draws``);
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
from numpyro_autospec.oracles import PerturbedOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.gof import assert_gof, chisquare_gof, encode_configurations, power_draws
from tests.tables import probabilities_of, random_table

N, Q = 4, 3
PAPER = SamplerConfig(root_windows=False)
WINDOWS = SamplerConfig(window=2, min_window=1, floor=4, fallback=3)
CONFIGS = {"paper": PAPER, "windows": WINDOWS}


#: the process of the random-table test, shared by the tests of other properties of the same
#: sampler (growth rate, sequential costs): the reference's jitted programs depend on the
#: table (a constant of every program), so one table means one set of compiled programs
TABLE_ORACLE = random_table(0)
TABLE_PROCESS = AnyOrderProcess(TABLE_ORACLE, N, Q)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_on_random_table(name):
    probs = probabilities_of(TABLE_ORACLE.log_probs)
    assert power_draws(0.012, 0.05, num_cells=81) <= 40_000
    values, rounds, _ = reference.sample_many(
        TABLE_PROCESS, jax.random.PRNGKey(1), 40_000, CONFIGS[name]
    )
    assert_gof(encode_configurations(values, Q), probs, threshold=1e-4, label=name)
    assert rounds.mean() < N + 3  # mostly accepted speculations


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_for_inconsistent_oracle_fixed_order(name):
    order = np.array([2, 0, 3, 1])
    oracle = PerturbedOracle(random_table(1), 0.5, jax.random.PRNGKey(2))
    probs = probabilities_of(oracle.sequential_log_probs(order))
    values, _, _ = reference.sample_many(
        AnyOrderProcess(oracle, N, Q, order=order), jax.random.PRNGKey(3), 8_000, CONFIGS[name]
    )
    assert_gof(encode_configurations(values, Q), probs, threshold=1e-4, label="inconsistent")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_exact_for_infilling(name):
    oracle = random_table(2)
    mask = np.array([True, False, True, False])
    observed = np.array([2, 0, 1, 0])
    probs = probabilities_of(oracle.conditional_log_probs(observed, mask))
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
    process = AnyOrderProcess(TABLE_ORACLE, N, Q)  # a new process: a fresh jit cache
    values, _, _ = reference.sample_many(process, jax.random.PRNGKey(1), 8_000, PAPER)
    result = chisquare_gof(
        encode_configurations(values, Q), probabilities_of(TABLE_ORACLE.log_probs)
    )
    assert result.p_value <= 1e-4
    reference._jitted.cache_clear()


def test_draws_do_not_depend_on_growth_rate():
    """The residual growth only sizes the batches of parallel trials (and so the cost), never
    the draw: the same keys give the same values at growth 1 and 1/4.  On the paper's recursion
    (``PAPER``); under ``WINDOWS`` at n = 4 a rejected block is short enough to draw its
    residual by enumeration, so no residual loop (and no growth) occurs there.  100 keys:
    about 7% of the draws reach a second batch of trials, which the cost check confirms."""
    costs_differ = 0
    for k in jax.random.split(jax.random.PRNGKey(6), 100):
        a = reference.sample(TABLE_PROCESS, k, PAPER._replace(growth=1.0))
        b = reference.sample(TABLE_PROCESS, k, PAPER._replace(growth=0.25))
        np.testing.assert_array_equal(a.value, b.value)
        costs_differ += (a.rounds, a.queries) != (b.rounds, b.queries)
    assert costs_differ > 0  # the growth did change the trial batches of some draws


def test_sequential_costs_n_rounds_and_queries():
    draw = reference.sample(
        TABLE_PROCESS, jax.random.PRNGKey(0), SamplerConfig(method="sequential")
    )
    assert (draw.rounds, draw.queries) == (N, N)
