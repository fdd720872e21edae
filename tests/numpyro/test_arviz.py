"""ArviZ and NumPyro diagnostics on AutospecKernel runs: rounds/queries in sample_stats, R-hat
about 1 and ESS about the number of draws (exact independent draws), and the acceptance
snippet of issue 4, verbatim."""

import arviz as az
import jax
import numpy as np
import numpyro
import pytest
from numpyro.diagnostics import summary
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.oracles import CurieWeissOracle
from tests.gof import assert_gof

N = 12


def model():
    x = numpyro.sample("x", AnyOrderAR(CurieWeissOracle(N, beta=1.0), N, 2))
    numpyro.deterministic("ups", x.sum())


@pytest.fixture(scope="module")
def mcmc():
    mcmc = MCMC(
        AutospecKernel(model, method="sequential"),
        num_warmup=0,
        num_samples=400,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(0), extra_fields=("rounds", "queries"))
    return mcmc


def test_from_numpyro_has_rounds_and_queries(mcmc):
    idata = az.from_numpyro(mcmc)
    stats = idata.sample_stats
    for name in ("rounds", "queries"):
        assert stats[name].dims == ("chain", "draw")
        assert stats[name].shape == (2, 400)
    assert (stats["rounds"].values == N).all()  # the sequential sampler: n rounds
    assert idata.posterior["x"].shape == (2, 400, N)
    assert idata.posterior["ups"].shape == (2, 400)


def test_rhat_and_ess_of_independent_draws(mcmc):
    """Independent exact draws: R-hat about 1 and bulk ESS about the 800 draws."""
    stats = summary(mcmc.get_samples(group_by_chain=True), group_by_chain=True)
    assert abs(float(stats["ups"]["r_hat"]) - 1.0) < 0.02
    assert 500 < float(stats["ups"]["n_eff"]) < 1300
    idata = az.from_numpyro(mcmc)
    assert abs(float(az.rhat(idata, var_names=["ups"])["ups"]) - 1.0) < 0.02
    assert float(az.ess(idata, var_names=["ups"])["ups"]) > 500


def test_print_summary_and_diagnostics_string(mcmc, capsys):
    mcmc.print_summary()
    printed = capsys.readouterr().out
    assert "r_hat" in printed and "x[0]" in printed
    kernel = mcmc.sampler
    state = jax.tree.map(lambda leaf: leaf[0], mcmc.last_state)
    assert kernel.get_diagnostics_str(state) == f"{N} rounds, {N} queries"


# Issue 4, "Done means": must work as written.
ACCEPTANCE_SNIPPET = """
import jax, numpyro
from numpyro.infer import MCMC
from numpyro_autospec import AutospecKernel, AnyOrderAR
from numpyro_autospec.oracles import CurieWeissOracle

def model():
    numpyro.sample("x", AnyOrderAR(CurieWeissOracle(256, beta=1.0), num_positions=256, num_categories=2))

mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=500, num_chains=2)
mcmc.run(jax.random.PRNGKey(0), extra_fields=("rounds", "queries"))
"""  # noqa: E501


@pytest.mark.slow
def test_issue_4_acceptance_snippet():
    """Issue 4's snippet, executed as written (engine, Curie-Weiss n = 256, 2 x 500 draws,
    default chain method and progress bar); then the magnetization law against the exact one,
    the rounds against the sequential sampler's 256, and the ArviZ conversion."""
    namespace = {}
    exec(ACCEPTANCE_SNIPPET, namespace)
    mcmc = namespace["mcmc"]
    x = np.asarray(mcmc.get_samples()["x"])
    assert x.shape == (1000, 256)
    law = np.exp(CurieWeissOracle(256, beta=1.0).magnetization_log_probs())
    assert_gof(x.sum(-1), law, label="magnetization")
    rounds = np.asarray(mcmc.get_extra_fields()["rounds"])
    assert rounds.mean() < 256 / 2
    idata = az.from_numpyro(mcmc)
    assert set(idata.sample_stats.data_vars) >= {"rounds", "queries"}
    stats = summary(mcmc.get_samples(group_by_chain=True), group_by_chain=True)
    magnetization = summary({"ups": x.sum(-1).reshape(2, 500)}, group_by_chain=True)["ups"]
    assert abs(float(magnetization["r_hat"]) - 1.0) < 0.05
    assert stats["x"]["r_hat"].shape == (256,)
