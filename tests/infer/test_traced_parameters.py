"""Oracle parameters and time grids that are traced: a latent site, a jit model argument.

The law tests: ``beta`` takes two values inside one compiled MCMC program, chosen by a latent
site among two values that are themselves a jit model argument, and the number of up spins
of each group of draws must follow ``magnetization_log_probs()`` of its own ``beta``
(chi-square, ``tests/gof.py``, p > 1e-4) and be rejected against the other ``beta``'s law.  A
second run of the same compiled program with the argument's two values swapped must swap the
laws, and a kernel run with a stale parameter (the first run's values baked in, the traced
argument ignored) is rejected by the same chi-square.

Power: about 300 draws per value of ``beta`` (at least 200 each, asserted) over the 9 cells
left after pooling catch only an absolute error of 0.22 in a cell of probability 0.2 at power
0.99 and threshold 1e-4 (``power_draws(0.22, 0.2, num_cells=9)``: 183 draws; checked on each
group that ran).  That tells the two laws apart (and a sampler
that ignores the traced value from a correct one); it does not check either law closely, which
the engine's own goodness-of-fit tests do (tests/engine/test_scheduler.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, Predictive

from numpyro_autospec import reference
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine import sequential_run
from numpyro_autospec.errors import OracleError
from numpyro_autospec.infer import AnyOrderAR, AutospecKernel, StochasticLocalization
from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle
from numpyro_autospec.processes import DiffusionProcess, uniform_times
from tests.gof import DEFAULT_THRESHOLD, assert_gof, chisquare_gof

N = 10
BETAS = (0.3, 1.8)  # disordered and ordered phases: very different magnetization laws
NUM_DRAWS = 600
#: the module docstring's power statement, checked on each group of draws
POWER = (0.22, 0.2)


def two_beta_model(betas):
    """``betas[ordered]``: a latent site picks one of two values given as a model argument."""
    ordered = numpyro.sample("ordered", dist.Bernoulli(0.5))
    beta = jnp.where(ordered, betas[1], betas[0])
    numpyro.sample("x", AnyOrderAR(CurieWeissOracle(N, beta=beta), N, 2))


def magnetization_law(beta: float) -> np.ndarray:
    return np.exp(CurieWeissOracle(N, beta=beta).magnetization_log_probs())


@pytest.fixture(scope="module")
def two_beta_runs():
    """Two runs of one ``MCMC`` with ``jit_model_args=True``: the argument ``BETAS``, then the
    two values swapped.  With the progress bar on, NumPyro keeps the jitted step between runs
    (without it, it jits its loop afresh at every run), so the second run reuses the compiled
    program and only the traced argument tells it the new laws.  Per run: the up-spin counts
    of the draws with ``ordered = 0`` and ``ordered = 1``."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("CI", "PYTEST_XDIST_WORKER"):  # NumPyro turns the bar off under these
            patch.delenv(variable, raising=False)
        mcmc = MCMC(
            AutospecKernel(two_beta_model),
            num_warmup=0,
            num_samples=NUM_DRAWS,
            jit_model_args=True,
        )
    runs = []
    for seed, betas in ((11, BETAS), (12, BETAS[::-1])):
        mcmc.run(jax.random.PRNGKey(seed), jnp.asarray(betas, jnp.float32))
        runs.append(up_counts_by_group(mcmc))
    return runs


def up_counts_by_group(mcmc):
    """The up-spin counts of a run's draws with ``ordered = 0`` and with ``ordered = 1``."""
    samples = mcmc.get_samples()
    ups = np.asarray(samples["x"]).sum(axis=1)
    ordered = np.asarray(samples["ordered"]).astype(bool)
    return ups[~ordered], ups[ordered]


def test_latent_beta_draws_follow_the_law_of_their_own_beta(two_beta_runs):
    for ups, beta in zip(two_beta_runs[0], BETAS, strict=True):
        assert ups.size > NUM_DRAWS // 3  # both values of beta were drawn
        counts, law = np.bincount(ups, minlength=N + 1), magnetization_law(beta)
        assert_gof(counts, law, label=f"{beta=}", catches=POWER)


def test_the_other_beta_law_is_rejected(two_beta_runs):
    for ups, other in zip(two_beta_runs[0], BETAS[::-1], strict=True):
        result = chisquare_gof(np.bincount(ups, minlength=N + 1), magnetization_law(other))
        assert result.p_value <= DEFAULT_THRESHOLD


def test_beta_as_a_jit_model_argument_gives_the_law_of_each_value(two_beta_runs):
    """The second run, same compiled program, the argument's values swapped: the draws with
    ``ordered = 0`` now follow ``beta = 1.8`` and those with ``ordered = 1`` ``beta = 0.3``
    (and not the laws of the first run)."""
    for ups, beta, other in zip(two_beta_runs[1], BETAS[::-1], BETAS, strict=True):
        assert ups.size > NUM_DRAWS // 3
        counts = np.bincount(ups, minlength=N + 1)
        assert_gof(counts, magnetization_law(beta), label=f"{beta=}", catches=POWER)
        assert chisquare_gof(counts, magnetization_law(other)).p_value <= DEFAULT_THRESHOLD


def test_a_stale_parameter_fails_the_same_test(monkeypatch):
    """A wrong sampler through the same kernel and program: its step is handed the first run's
    argument ``BETAS`` as a constant whatever the traced argument holds (a kernel that baked
    its model arguments into the compiled program).  The swapped run's draws then fail the
    chi-square of :func:`test_beta_as_a_jit_model_argument_gives_the_law_of_each_value`."""
    sample = AutospecKernel.sample
    stale = (jnp.asarray(BETAS, jnp.float32),)
    monkeypatch.setattr(
        AutospecKernel, "sample", lambda self, state, _, kwargs: sample(self, state, stale, kwargs)
    )
    mcmc = MCMC(
        AutospecKernel(two_beta_model),
        num_warmup=0,
        num_samples=NUM_DRAWS,
        jit_model_args=True,
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(12), jnp.asarray(BETAS[::-1], jnp.float32))
    for ups, beta in zip(up_counts_by_group(mcmc), BETAS[::-1], strict=True):
        assert ups.size > NUM_DRAWS // 3
        result = chisquare_gof(np.bincount(ups, minlength=N + 1), magnetization_law(beta))
        assert result.p_value <= DEFAULT_THRESHOLD, result


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


def test_the_kernel_finds_the_latent_sites_a_pytree_oracle_depends_on(monkeypatch):
    """An oracle that is a pytree of arrays depends on the latent sites its leaves depend on,
    found from the leaves without evaluating the oracle's conditionals while the dependencies
    are tracked (a network is not traced again at every ``MCMC.run``); its own parameters
    given as constants make it depend on none."""
    from numpyro_autospec.infer import _inspection, inspect_model

    def fail(*args):
        raise AssertionError("the oracle was called to track dependencies")

    def provenance_without_oracle_calls(*args, **kwargs):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(CurieWeissOracle, "log_conditionals", fail)
            return eval_provenance(*args, **kwargs)

    eval_provenance = _inspection.eval_provenance
    monkeypatch.setattr(_inspection, "eval_provenance", provenance_without_oracle_calls)
    betas = jnp.asarray(BETAS, jnp.float32)
    assert inspect_model(two_beta_model, (betas,)).oracle_parents == {"x": ("ordered",)}

    def constant_beta():
        numpyro.sample("ordered", dist.Bernoulli(0.5))
        numpyro.sample("x", AnyOrderAR(CurieWeissOracle(N, beta=0.5), N, 2))

    assert inspect_model(constant_beta).oracle_parents == {"x": ()}

    def untraceable(*args, **kwargs):
        raise TypeError("no tracing today")

    # a model whose dependencies cannot be tracked depends on every earlier latent site
    monkeypatch.setattr(_inspection, "eval_provenance", untraceable)
    assert inspect_model(constant_beta).oracle_parents == {"x": ("ordered",)}


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


def grid_and_variance_model(times, variance):
    denoiser = PointCloudDenoiser(POINTS)
    numpyro.sample(
        "y", StochasticLocalization(denoiser, 2, times=times, speculation_variance=variance)
    )


def test_time_grid_computed_in_the_model():
    def model():
        t_max = numpyro.sample("t_max", dist.Uniform(150.0, 250.0))
        grid_model(jnp.asarray(GRID) / GRID[-1] * t_max)

    mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=4, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    samples = mcmc.get_samples()
    draws = np.asarray(samples["y"])
    nearest = np.min(np.sum((draws[:, None, :] - np.asarray(POINTS)[None]) ** 2, -1), 1)
    assert draws.shape == (4, 2) and np.all(nearest < 1e-3)  # t_max >= 150 resolves a point
    # the draws are known: the reference's on each draw's grid, for the key of the site y
    # (the second key-consuming site of each draw: the kernel splits its key once per draw,
    # handlers.seed once per site)
    expected = []
    state_key = jax.random.PRNGKey(0)
    for t_max in np.asarray(samples["t_max"]):
        state_key, draw_key = jax.random.split(state_key)
        site_key = jax.random.split(jax.random.split(draw_key)[0])[1]
        process = DiffusionProcess(
            PointCloudDenoiser(POINTS), 2, jnp.asarray(GRID) / GRID[-1] * t_max
        )
        expected.append(np.asarray(reference.sample(process, site_key).value))
    np.testing.assert_allclose(draws, np.stack(expected), atol=1e-5)


def test_time_grid_and_speculation_variance_as_jit_model_arguments_match_the_concrete_ones():
    """A time grid and a linear-response speculation variance are data: traced
    (``jit_model_args=True``) they give, key for key, the three draws of the same grid and
    variance given concretely.  One site takes both (the linear-response speculation reads
    the grid's times, step sizes and growths, every use of the grid the default speculation
    makes, and the variance), so the comparison is two compiled programs, not four."""
    draws = []
    for arguments, jit_model_args in (
        ((jnp.asarray(GRID), jnp.float32(0.05)), True),
        ((GRID, 0.05), False),
    ):
        mcmc = MCMC(
            AutospecKernel(grid_and_variance_model),
            num_warmup=0,
            num_samples=3,
            jit_model_args=jit_model_args,
            progress_bar=False,
        )
        mcmc.run(jax.random.PRNGKey(2), *arguments)
        draws.append(np.asarray(mcmc.get_samples()["y"]))
    np.testing.assert_allclose(draws[0], draws[1], atol=1e-5)


def test_prior_predictive_with_a_traced_grid():
    def model():
        t_max = numpyro.sample("t_max", dist.Uniform(150.0, 250.0))
        grid_model(jnp.linspace(0.0, 1.0, 17) * t_max)

    prior = Predictive(model, num_samples=3, return_sites=["t_max", "y"])(jax.random.PRNGKey(0))
    # the draws are known: the sequential chain's (StochasticLocalization.sample) on each
    # draw's grid, for the key of the site y (Predictive splits its key once per draw,
    # handlers.seed each draw's key once per site)
    expected = []
    for draw_key, t_max in zip(
        jax.random.split(jax.random.PRNGKey(0), 3), np.asarray(prior["t_max"]), strict=True
    ):
        site_key = jax.random.split(jax.random.split(draw_key)[0])[1]
        times = jnp.linspace(0.0, 1.0, 17) * t_max
        process = DiffusionProcess(PointCloudDenoiser(POINTS), 2, times)
        expected.append(np.asarray(sequential_run(process, site_key[None]).value[0]))
    np.testing.assert_allclose(prior["y"], np.stack(expected), atol=1e-5)
