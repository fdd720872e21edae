"""Oracle parameters and time grids that are traced: a latent site, a jit model argument.

The law test: ``beta`` takes two values inside one compiled MCMC program (a latent site), and
the number of up spins of each group of draws must follow ``magnetization_log_probs()`` of
its own ``beta`` (chi-square, ``tests/gof.py``, p > 1e-4) and be rejected against the other
``beta``'s law, which shows the test has the power to see a sampler that ignores the traced
value.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, Predictive

from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.numpyro import AnyOrderAR, AutospecKernel, StochasticLocalization
from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle, OracleError
from numpyro_autospec.processes.diffusion import uniform_times
from tests.gof import DEFAULT_THRESHOLD, assert_gof, chisquare_gof

N = 10
BETAS = (0.3, 1.8)  # disordered and ordered phases: very different magnetization laws
NUM_DRAWS = 600


def two_beta_model():
    ordered = numpyro.sample("ordered", dist.Bernoulli(0.5))
    beta = jnp.where(ordered, BETAS[1], BETAS[0])
    numpyro.sample("x", AnyOrderAR(CurieWeissOracle(N, beta=beta), N, 2))


def magnetization_law(beta: float) -> np.ndarray:
    return np.exp(CurieWeissOracle(N, beta=beta).magnetization_log_probs())


@pytest.fixture(scope="module")
def two_beta_draws():
    mcmc = MCMC(
        AutospecKernel(two_beta_model), num_warmup=0, num_samples=NUM_DRAWS, progress_bar=False
    )
    mcmc.run(jax.random.PRNGKey(11))
    samples = mcmc.get_samples()
    ups = np.asarray(samples["x"]).sum(axis=1)
    ordered = np.asarray(samples["ordered"]).astype(bool)
    return ups[~ordered], ups[ordered]


def test_latent_beta_draws_follow_the_law_of_their_own_beta(two_beta_draws):
    for ups, beta in zip(two_beta_draws, BETAS, strict=True):
        assert ups.size > NUM_DRAWS // 3  # both values of beta were drawn
        assert_gof(np.bincount(ups, minlength=N + 1), magnetization_law(beta), label=f"{beta=}")


def test_the_other_beta_law_is_rejected(two_beta_draws):
    for ups, other in zip(two_beta_draws, BETAS[::-1], strict=True):
        result = chisquare_gof(np.bincount(ups, minlength=N + 1), magnetization_law(other))
        assert result.p_value <= DEFAULT_THRESHOLD


def test_beta_as_a_jit_model_argument_gives_the_law_of_each_value():
    def model(beta):
        numpyro.sample("x", AnyOrderAR(CurieWeissOracle(N, beta=beta), N, 2))

    mcmc = MCMC(
        AutospecKernel(model),
        num_warmup=0,
        num_samples=300,
        jit_model_args=True,
        progress_bar=False,
    )
    for beta, other in (BETAS, BETAS[::-1]):
        mcmc.run(jax.random.PRNGKey(5), jnp.float32(beta))
        counts = np.bincount(np.asarray(mcmc.get_samples()["x"]).sum(1), minlength=N + 1)
        assert_gof(counts, magnetization_law(beta), label=f"{beta=}")
        assert chisquare_gof(counts, magnetization_law(other)).p_value <= DEFAULT_THRESHOLD


def test_traced_oracles_are_pytrees_with_their_parameters_as_leaves():
    oracle = CurieWeissOracle(4, beta=0.5, h=0.1)
    leaves, treedef = jax.tree.flatten(oracle)
    assert [float(v) for v in leaves] == [0.5, 0.1]
    rebuilt = jax.tree.unflatten(treedef, [jnp.float32(2.0), jnp.float32(0.0)])
    assert isinstance(rebuilt, CurieWeissOracle) and rebuilt.num_positions == 4
    # a jitted function of the oracle compiles once and sees the new beta
    up_probability = jax.jit(lambda o: jnp.exp(o(jnp.ones(4, jnp.int32), jnp.arange(4) < 3)[3, 1]))
    assert float(up_probability(rebuilt)) > float(up_probability(oracle))
    assert oracle != CurieWeissOracle(4, beta=0.5, h=0.1)  # identity equality
    ising = IsingChainOracle.uniform(3, coupling=0.5)
    assert len(jax.tree.leaves(ising)) == 2


def test_traced_parameters_are_not_checked_or_clipped_and_concrete_ones_are():
    def answer(beta):
        return CurieWeissOracle(4, beta=beta)(jnp.zeros(4, jnp.int32), jnp.zeros(4, bool))

    assert bool(jnp.all(jnp.isnan(jax.jit(answer)(jnp.float32(jnp.nan)))))
    with pytest.raises(
        OracleError, match=r"^CurieWeissOracle: beta must be finite, got beta = nan$"
    ):
        answer(float("nan"))


def test_host_side_laws_need_concrete_parameters():
    def law(beta):
        return CurieWeissOracle(4, beta=beta).magnetization_log_probs()

    with pytest.raises(OracleError, match=r"^CurieWeissOracle: beta is a traced value"):
        jax.jit(law)(jnp.float32(1.0))


# --- traced time grids -------------------------------------------------------------------------

POINTS = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
GRID = uniform_times(16, 200.0)


def grid_model(times):
    numpyro.sample("y", StochasticLocalization(PointCloudDenoiser(POINTS), 2, times=times))


def test_time_grid_computed_in_the_model():
    def model():
        t_max = numpyro.sample("t_max", dist.Uniform(150.0, 250.0))
        grid_model(jnp.asarray(GRID) / GRID[-1] * t_max)

    mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=4, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    draws = np.asarray(mcmc.get_samples()["y"])
    nearest = np.min(np.sum((draws[:, None, :] - np.asarray(POINTS)[None]) ** 2, -1), 1)
    assert draws.shape == (4, 2) and np.all(nearest < 1e-3)  # t_max >= 150 resolves a point


def assert_traced_argument_gives_the_concrete_draws(model, seed, traced, concrete):
    """Three draws of site ``y`` with the model's argument traced (``jit_model_args=True``)
    equal the draws with the same argument given concretely."""
    draws = []
    for argument, jit_model_args in ((traced, True), (concrete, False)):
        mcmc = MCMC(
            AutospecKernel(model),
            num_warmup=0,
            num_samples=3,
            jit_model_args=jit_model_args,
            progress_bar=False,
        )
        mcmc.run(jax.random.PRNGKey(seed), argument)
        draws.append(np.asarray(mcmc.get_samples()["y"]))
    np.testing.assert_allclose(draws[0], draws[1], atol=1e-5)


def test_time_grid_as_a_jit_model_argument_matches_the_concrete_grid():
    assert_traced_argument_gives_the_concrete_draws(grid_model, 2, jnp.asarray(GRID), GRID)


def variance_model(variance):
    numpyro.sample(
        "y",
        StochasticLocalization(
            PointCloudDenoiser(POINTS), 2, times=GRID, speculation_variance=variance
        ),
    )


def test_speculation_variance_as_a_jit_model_argument_matches_the_concrete_one():
    """The linear-response speculation's variance is data: traced (``jit_model_args``) it
    gives the draws of the same variance given as a number."""
    assert_traced_argument_gives_the_concrete_draws(variance_model, 3, jnp.float32(0.05), 0.05)


def test_prior_predictive_with_a_traced_grid():
    def model():
        t_max = numpyro.sample("t_max", dist.Uniform(150.0, 250.0))
        grid_model(jnp.linspace(0.0, 1.0, 17) * t_max)

    draws = Predictive(model, num_samples=3)(jax.random.PRNGKey(0))["y"]
    assert draws.shape == (3, 2) and bool(jnp.all(jnp.isfinite(draws)))
