"""AutospecKernel: exact draws through NumPyro's MCMC driver, every chain method, the models it
refuses (with the site named), and a wrong sampler caught by the same goodness-of-fit test.

Exactness is shown at two levels: draw for draw (the kernel's draws and rounds are those of the
reference sampler, the executable specification, for the keys NumPyro hands the site; the
engine equals the reference in tests/engine), and by
chi-square goodness of fit of >= 20 000 draws taken through ``MCMC`` against the exact table
and the exact infilling conditional (p > 1e-4, fixed seeds).  The kernel with a broken engine
(a verifier that keeps every drafted site, residual trials accepted unconditionally) is
rejected by the same chi-squares, on the table and on the infilling conditional; a sequential
sampler drawing from tempered conditionals is rejected by the z-test of the oracle that closes
over a latent parameter.
"""

import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC

from numpyro_autospec import (
    AnyOrderAR,
    AutospecKernel,
    SamplerConfig,
    StochasticLocalization,
    reference,
)
from numpyro_autospec.errors import UnsupportedModelError
from numpyro_autospec.infer import draw_model, inspect_model
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.broken import (
    break_block_verification,
    break_residual_trials,
    break_target_steps,
)
from tests.fresh_process import run_python, user_environment
from tests.gof import assert_gof, chisquare_gof, encode_configurations, mean_z_test
from tests.tables import random_table

N, Q = 4, 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


TABLE = random_table(0)


def table_model():
    numpyro.sample("x", AnyOrderAR(TABLE, N, Q))


def run_mcmc(kernel, num_samples, *, num_chains=1, chain_method="sequential", seed=0, **kw):
    # with progress_bar=False NumPyro compiles the sampler once per chain of a "sequential"
    # run (a fresh jitted closure per chain); with the bar it compiles once
    mcmc = MCMC(
        kernel,
        num_warmup=kw.pop("num_warmup", 0),
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=num_chains > 1 and chain_method != "vectorized",
    )
    mcmc.run(jax.random.PRNGKey(seed), **kw)
    return mcmc


def seed_keys(draw_key, num_sites):
    """The keys ``handlers.seed`` gives the first ``num_sites`` key-consuming sites of a model
    run with ``draw_key`` (it splits its key once per site; plates without subsampling take
    none)."""
    keys = []
    for _ in range(num_sites):
        draw_key, site_key = jax.random.split(draw_key)
        keys.append(site_key)
    return keys


def site_keys(rng_key, num_chains, num_samples, num_sites=1):
    """``[chain, iteration, site]`` keys of the model's sample sites: MCMC splits the run key
    per chain, the kernel splits its state key once per draw (warmup iterations draw
    nothing and leave it alone)."""
    chain_keys = jax.random.split(rng_key, num_chains) if num_chains > 1 else [rng_key]
    keys = []
    for key in chain_keys:
        for _ in range(num_samples):
            key, draw_key = jax.random.split(key)
            keys.append(jnp.stack(seed_keys(draw_key, num_sites)))
    return jnp.stack(keys).reshape(num_chains, num_samples, num_sites, -1)


def reference_draws(process, keys, config=None):
    draws = [reference.sample(process, key, config) for key in keys]
    return np.stack([np.asarray(d.value) for d in draws]), np.array([d.rounds for d in draws])


# ----------------------------------------------------------------------------- exactness
def test_sequential_chains_with_warmup_and_progress_bar(capfd, monkeypatch):
    """Two chains run one after another (chain_method="sequential", with the progress bar),
    here with the sequential sampler (the chain plumbing does not depend on the method; the
    engine runs through it in the tests below): every draw is the reference's for the key
    NumPyro hands the site.  Warmup is a no-op, so the draws after 3 warmup iterations are
    those of ``num_warmup=0``; the bar shows the last draw's rounds, evaluations and steps."""
    for variable in ("CI", "PYTEST_XDIST_WORKER"):  # NumPyro turns the bar off under these
        monkeypatch.delenv(variable, raising=False)
    mcmc = MCMC(
        AutospecKernel(table_model, method="sequential"),
        num_warmup=3,
        num_samples=6,
        num_chains=2,
        chain_method="sequential",
    )
    mcmc.run(jax.random.PRNGKey(0))
    keys = site_keys(jax.random.PRNGKey(0), 2, 6)[:, :, 0].reshape(12, -1)
    config = SamplerConfig(method="sequential")
    value, rounds = reference_draws(AnyOrderProcess(TABLE, N, Q), keys, config)
    x = np.asarray(mcmc.get_samples(group_by_chain=True)["x"])
    np.testing.assert_array_equal(x, value.reshape(2, 6, N))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert (extra["rounds"] == N).all() and (extra["queries"] == N).all()
    bar = capfd.readouterr().err
    assert "warmup" in bar and "sample" in bar
    assert f"{N} rounds, {N} evaluations, {N} steps" in bar


OBSERVED, MASK = np.array([0, 2, 0, 1]), np.array([False, True, False, True])


def test_exact_through_mcmc_on_a_table_and_infilling():
    """The table and the infilling target (sites 1 and 3 pinned) in one run, in one test (so
    that pytest-xdist runs it once): 2 vectorized chains (each site's draws of both chains in
    one engine pool) x 4 iterations x a plate of 2500 = 20 000 draws of each site.

    * The first 2 plate draws of each site, chain and iteration (a site's plate draws use
      ``split(site_key, 2500)``) are the reference sampler's.
    * Chi-square against the exact table and against ``TableOracle.conditional_log_probs``
      (p > 1e-4).  The table: 76 cells after pooling, where 20 000 draws detect an absolute
      error of 0.016 in a cell of probability 0.05 at power 0.99 (``power_draws(0.016, 0.05,
      num_cells=76)``: 19 654); the infilling law: 9 cells (two sites pinned), 0.016 at 0.1.
    """

    def model():
        with numpyro.plate("draws", 2500):
            numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
            numpyro.sample("infill", AnyOrderAR(TABLE, N, Q, observed=OBSERVED, observed_mask=MASK))

    mcmc = run_mcmc(AutospecKernel(model), 4, num_chains=2, chain_method="vectorized", seed=1)
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    infill_process = AnyOrderProcess(TABLE, N, Q, observed_values=OBSERVED, observed_mask=MASK)
    keys = site_keys(jax.random.PRNGKey(1), 2, 4, num_sites=2)
    for index, (name, process) in enumerate(
        [("x", AnyOrderProcess(TABLE, N, Q)), ("infill", infill_process)]
    ):
        site = keys[:, :, index].reshape(8, -1)
        plate_keys = jax.vmap(lambda key: jax.random.split(key, 2500)[:2])(site)
        value, _ = reference_draws(process, plate_keys.reshape(16, -1))
        np.testing.assert_array_equal(samples[name][:, :, :2].reshape(16, N), value)

    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert extra["rounds"].shape == (2, 4)
    assert (extra["rounds"] >= 2).all() and (extra["queries"] >= 2 * 2500 * 2).all()

    x = samples["x"].reshape(-1, N)
    assert x.shape == (20_000, N)
    law = np.exp(TABLE.log_probs).ravel()
    assert_gof(encode_configurations(x, Q), law, label="kernel", catches=(0.016, 0.05))
    infill = samples["infill"].reshape(-1, N)
    assert (infill[:, MASK] == OBSERVED[MASK]).all()
    expected = np.exp(TABLE.conditional_log_probs(OBSERVED, MASK)).ravel()
    assert_gof(encode_configurations(infill, Q), expected, label="infilling", catches=(0.016, 0.1))


def test_parallel_chains_on_two_devices(tmp_path):
    """chain_method="parallel" with two host devices (pmap), in a subprocess: the draws are
    the reference sampler's."""
    script = textwrap.dedent(
        f"""
        import numpy as np, jax, numpyro
        from numpyro.infer import MCMC
        from numpyro_autospec import AnyOrderAR, AutospecKernel
        from tests.infer.test_kernel import TABLE, N, Q
        assert jax.local_device_count() == 2
        def table_model():
            numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
        mcmc = MCMC(AutospecKernel(table_model), num_warmup=2, num_samples=3, num_chains=2,
                    chain_method="parallel", progress_bar=False)
        mcmc.run(jax.random.PRNGKey(0))
        np.save({str(tmp_path / "x.npy")!r}, np.asarray(mcmc.get_samples(group_by_chain=True)["x"]))
        """
    )
    env = user_environment(
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=ROOT,
    )
    run_python(script, cwd=ROOT, env=env, timeout=600)
    keys = site_keys(jax.random.PRNGKey(0), 2, 3)[:, :, 0].reshape(6, -1)
    value, _ = reference_draws(AnyOrderProcess(TABLE, N, Q), keys)
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), value.reshape(2, 3, N))


#: the kernel's engine with one broken piece (tests/engine/broken.py), by config: the default
#: root's block verification keeps every drafted site; the paper's residual trials are accepted
#: unconditionally
BROKEN = {
    "autospec": (
        SamplerConfig(),
        break_block_verification,
    ),
    "paper": (
        SamplerConfig(root_windows=False),
        break_residual_trials,
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_wrong_sampler_fails_the_same_test(monkeypatch, name):
    """``AutospecKernel`` with a broken engine (:data:`BROKEN`, traced into a fresh MCMC
    program), on the sites of :func:`test_exact_through_mcmc_on_a_table_and_infilling` (the
    table, and the infilling target with sites 1 and 3 pinned) in one model: a plate of 4 000
    draws of each is rejected (p <= 1e-4) by that test's chi-square against the table and
    against the infilling conditional; the pinned entries are still kept.  Measured: autospec
    (keep every drafted site) p = 0 on both (statistics 26 626 on 67 dof and 3 026 on 8);
    paper (every residual trial accepted) p = 8e-61 (table) and 7e-32 (infilling)."""
    config, breaks = BROKEN[name]
    breaks(monkeypatch)

    def model():
        with numpyro.plate("draws", 4_000):
            numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
            numpyro.sample("infill", AnyOrderAR(TABLE, N, Q, observed=OBSERVED, observed_mask=MASK))

    mcmc = run_mcmc(AutospecKernel(model, config=config), 1, seed=2)
    samples = {k: np.asarray(v).reshape(-1, N) for k, v in mcmc.get_samples().items()}
    assert (samples["infill"][:, MASK] == OBSERVED[MASK]).all()
    laws = {
        "x": np.exp(TABLE.log_probs).ravel(),
        "infill": np.exp(TABLE.conditional_log_probs(OBSERVED, MASK)).ravel(),
    }
    for site, law in laws.items():
        result = chisquare_gof(encode_configurations(samples[site], Q), law)
        assert result.p_value <= 1e-4, (site, result)


def test_stochastic_localization_site_draws_are_the_reference_draws():
    """A diffusion site runs on the same engine: the kernel's draws are the reference's, and
    method="sequential" costs N + 1 rounds (N Euler-Maruyama steps and the final denoising)."""
    from numpyro_autospec.denoisers import PointCloudDenoiser
    from numpyro_autospec.processes import DiffusionProcess, uniform_times

    denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    times = uniform_times(8, 20.0)

    def model():
        numpyro.sample("y", StochasticLocalization(denoiser, dim=2, times=times))

    mcmc = run_mcmc(AutospecKernel(model), 5)
    process = DiffusionProcess(denoiser, 2, times)
    draws = [
        reference.sample(process, key) for key in site_keys(jax.random.PRNGKey(0), 1, 5)[0, :, 0]
    ]
    expected = np.stack([np.asarray(draw.value) for draw in draws])
    np.testing.assert_allclose(mcmc.get_samples()["y"], expected, atol=1e-5)
    np.testing.assert_array_equal(mcmc.get_extra_fields()["rounds"], [d.rounds for d in draws])
    sequential = run_mcmc(AutospecKernel(model, method="sequential"), 3)
    assert (sequential.get_extra_fields()["rounds"] == 9).all()


# ------------------------------------------------------------------- model shapes accepted
@pytest.mark.parametrize("chain_method", ["sequential", "vectorized", "parallel"])
def test_chain_methods_and_sequential_method(chain_method):
    def model():
        x = numpyro.sample("x", AnyOrderAR(CurieWeissOracle(10, beta=1.0), 10, 2))
        numpyro.deterministic("ups", x.sum())

    kernel = AutospecKernel(model, method="sequential")
    if chain_method == "parallel":
        # the suite runs on one host device (tests/conftest.py): NumPyro says so and draws the
        # chains one after another (test_parallel_chains_on_two_devices runs them on two)
        with pytest.warns(UserWarning, match="not enough devices"):
            mcmc = run_mcmc(kernel, 30, num_chains=2, chain_method=chain_method, num_warmup=5)
    else:
        mcmc = run_mcmc(kernel, 30, num_chains=2, chain_method=chain_method, num_warmup=5)
    samples = mcmc.get_samples(group_by_chain=True)
    # the draws are known: the reference's for the keys NumPyro hands the site (warmup
    # iterations draw nothing)
    keys = site_keys(jax.random.PRNGKey(0), 2, 30)[:, :, 0].reshape(60, -1)
    process = AnyOrderProcess(CurieWeissOracle(10, beta=1.0), 10, 2)
    value, _ = reference_draws(process, keys, SamplerConfig(method="sequential"))
    np.testing.assert_array_equal(samples["x"], value.reshape(2, 30, 10))
    np.testing.assert_array_equal(samples["ups"], samples["x"].sum(-1))
    assert not np.array_equal(samples["x"][0], samples["x"][1])  # independent chains
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert (extra["rounds"] == 10).all() and (extra["queries"] == 10).all()


#: the number of sites of :func:`latent_parameter_model`
LATENT_N = 6


def latent_parameter_model():
    """theta ~ Normal(0, 1.5), then ``LATENT_N`` sites whose plain function oracle closes over
    theta: given theta they are iid Bernoulli(sigmoid(theta))."""
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.5))

    def oracle(x, mask):
        row = jnp.stack([jax.nn.log_sigmoid(-theta), jax.nn.log_sigmoid(theta)])
        return jnp.broadcast_to(row, (LATENT_N, 2))

    numpyro.sample("x", AnyOrderAR(oracle, num_positions=LATENT_N, num_categories=2))


def latent_parameter_residuals(samples):
    """``[D, 2]``: per draw, the standardized residual of the site mean given theta,
    ``z = (mean(x) - p) / sqrt(p (1 - p) / n)`` with ``p = sigmoid(theta)``, and ``sign(theta)
    z``.  Given theta both have mean 0 and variance 1 exactly (the draws are iid: each MCMC
    iteration draws theta and x afresh).  The first is blind to an error symmetric in theta
    (sites pulled towards or away from 1/2, or drawn with another draw's theta: the biases of
    theta and -theta cancel); the second sees it."""
    theta = np.asarray(samples["theta"], np.float64)
    p = 1.0 / (1.0 + np.exp(-theta))
    z = (np.asarray(samples["x"], np.float64).mean(-1) - p) / np.sqrt(p * (1 - p) / LATENT_N)
    return np.stack([z, np.sign(theta) * z], axis=-1)


def run_latent_parameter_model():
    # the oracle differs between chains, so vectorized chains vmap the per-chain step; the
    # sequential sampler keeps this test cheap (the plumbing does not depend on the method,
    # and the engine under jit and vmap is tested in tests/engine/test_scheduler.py)
    kernel = AutospecKernel(latent_parameter_model, method="sequential")
    return run_mcmc(kernel, 150, num_chains=2, chain_method="vectorized").get_samples()


def test_plain_function_oracle_with_latent_parameters():
    """The oracle closes over an earlier latent site; the process is rebuilt inside each draw.
    A z-test (:func:`tests.gof.mean_z_test`, p > 1e-4, Bonferroni over 2 coordinates: |z| <
    4.06) of the residuals of :func:`latent_parameter_residuals` over 2 x 150 draws (measured
    z = -0.06 and -0.73, p = 0.92).  Power: a bias of delta in every site's probability of 1
    given theta, towards 1 (first coordinate) or away from 1/2 (second), shifts each residual
    by delta / sqrt(p (1 - p) / 6) >= 2 sqrt(6) delta, so the z-score by >= 84.9 delta; power
    0.99 needs 84.9 delta >= 4.06 + 2.33, caught from delta = 0.075."""
    assert inspect_model(latent_parameter_model).oracle_parents == {"x": ("theta",)}
    samples = run_latent_parameter_model()
    mean_z_test(latent_parameter_residuals(samples), 0.0)
    assert float(jnp.corrcoef(samples["theta"], samples["x"].mean(-1))[0, 1]) > 0.5


def test_a_tempered_sampler_fails_the_latent_parameter_z_test(monkeypatch):
    """The run of :func:`test_plain_function_oracle_with_latent_parameters` with every site
    drawn from its conditional squared and renormalized (``tempered_target_sample``, traced
    into a fresh MCMC program): the sites are pushed away from 1/2, and the same z-test
    rejects it, on the sign-weighted residual (measured z = +12.6, p = 6e-36; the plain
    residual, z = -0.53, and the correlation with theta do not see it)."""
    break_target_steps(monkeypatch)
    residuals = latent_parameter_residuals(run_latent_parameter_model())
    with pytest.raises(AssertionError, match=r"mean z-test failed.* worst coordinate 1: "):
        mean_z_test(residuals, 0.0)
    signed = residuals[:, 1]
    assert signed.mean() / (signed.std(ddof=1) / np.sqrt(signed.size)) > 8


def test_forward_sampled_sites_observations_without_latent_parents_and_obs_oracle_sites():
    def model(data):
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        numpyro.sample("noise", dist.Normal(0.0, 1.0), obs=data)  # no latent parent: fine
        numpyro.sample("known", AnyOrderAR(TABLE, N, Q), obs=jnp.array([0, 1, 2, 0]))
        x = numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
        numpyro.sample("y", dist.Normal(x.sum() * scale, 1.0))  # latent child: forward
        numpyro.sample("several", AnyOrderAR(TABLE, N, Q), sample_shape=(3,))
        numpyro.deterministic("twice", 2 * x)

    inspection = inspect_model(model, (jnp.zeros(3),))
    assert inspection.oracle_sites == ("x", "several")
    assert inspection.latent_sites == ("scale", "y")
    assert inspection.observed_sites == ("noise", "known")
    mcmc = run_mcmc(AutospecKernel(model, method="sequential"), 20, data=jnp.zeros(3))
    samples = mcmc.get_samples()
    assert set(samples) == {"scale", "x", "y", "several", "twice"}
    assert samples["several"].shape == (20, 3, N)
    assert (mcmc.get_extra_fields()["rounds"] == 2 * N).all()  # x, then the 3 draws at once
    np.testing.assert_array_equal(samples["twice"], 2 * samples["x"])


def test_to_event_expand_and_masks_over_draws():
    """Oracle distributions expanded and made an event (``.expand([3]).to_event(1)``) are
    drawn by the engine like ``sample_shape=(3,)``; ``obs_mask`` over a plate of draws
    observes whole draws (the others are drawn from the prior)."""
    data = jnp.array([[0, 1, 2, 0], [-1, -1, -1, -1], [2, 2, 1, 0]])  # row 1 is not observed

    def model():
        numpyro.sample("event", AnyOrderAR(TABLE, N, Q).expand([3]).to_event(1))
        with numpyro.plate("three", 3):
            numpyro.sample("rows", AnyOrderAR(TABLE, N, Q), obs=data, obs_mask=data[:, 0] >= 0)
            numpyro.sample("masked", AnyOrderAR(TABLE, N, Q).mask(jnp.array([True, False, True])))

    inspection = inspect_model(model)
    assert inspection.oracle_sites == ("event", "rows_unobserved", "masked")
    assert inspection.num_steps == 3 * N + 3 * N + 3 * N
    mcmc = run_mcmc(AutospecKernel(model, method="sequential"), 5)
    samples = {name: np.asarray(value) for name, value in mcmc.get_samples().items()}
    assert samples["event"].shape == samples["masked"].shape == (5, 3, N)
    assert samples["rows"].shape == (5, 3, N)
    observed = np.asarray(data)[[0, 2]]
    np.testing.assert_array_equal(samples["rows"][:, [0, 2]], np.broadcast_to(observed, (5, 2, N)))
    np.testing.assert_array_equal(samples["rows"][:, 1], samples["rows_unobserved"][:, 1])
    assert (mcmc.get_extra_fields()["rounds"] == 3 * N).all()  # 3 sites, each 3 draws at once


def test_typed_keys_traced_model_arguments_warmup_and_no_oracle_site():
    def model(scale):
        s = numpyro.sample("s", dist.Normal(0.0, scale))
        x = numpyro.sample("x", AnyOrderAR(CurieWeissOracle(8, 1.0), 8, 2))
        numpyro.deterministic("d", x.sum() * s)

    mcmc = MCMC(
        AutospecKernel(model, method="sequential"),
        num_warmup=3,
        num_samples=5,
        jit_model_args=True,
        progress_bar=False,
    )
    mcmc.run(jax.random.key(0), 2.0)
    samples = mcmc.get_samples()
    # x is the model's second key-consuming site; a typed key has the raw key's bits
    keys = site_keys(jax.random.PRNGKey(0), 1, 5, num_sites=2)[0, :, 1]
    process = AnyOrderProcess(CurieWeissOracle(8, 1.0), 8, 2)
    value, _ = reference_draws(process, keys, SamplerConfig(method="sequential"))
    np.testing.assert_array_equal(samples["x"], value)
    np.testing.assert_allclose(samples["d"], samples["x"].sum(-1) * samples["s"], rtol=1e-6)

    def no_oracle():
        numpyro.sample("a", dist.Normal())

    mcmc = run_mcmc(AutospecKernel(no_oracle), 4)
    assert (mcmc.get_extra_fields()["rounds"] == 0).all()


def test_draw_model_is_a_pure_function():
    config = SamplerConfig(method="sequential")
    draw = jax.jit(lambda key: draw_model(table_model, key, config=config))(jax.random.PRNGKey(3))
    key = seed_keys(jax.random.PRNGKey(3), 1)[0]
    expected = reference.sample(AnyOrderProcess(TABLE, N, Q), key, config)
    np.testing.assert_array_equal(draw.z["x"], expected.value)
    assert int(draw.rounds) == N


def test_method_and_config():
    assert AutospecKernel(table_model).config.method == "autospec"
    assert AutospecKernel(table_model, method="assd").config.method == "assd"
    config = SamplerConfig(method="block", block_size=2)
    assert AutospecKernel(table_model, config=config).config == config
    with pytest.raises(ValueError, match="method must be one of"):
        AutospecKernel(table_model, method="gibbs")


# ----------------------------------------------------------------------------- refusals
def _init(model, *args):
    AutospecKernel(model).init(jax.random.PRNGKey(0), 0, None, args, {})


def test_refuses_latent_site_with_observed_descendant():
    def model(y):
        mu = numpyro.sample("mu", dist.Normal())
        numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
        numpyro.sample("obs", dist.Normal(mu, 1.0), obs=y)

    with pytest.raises(UnsupportedModelError, match=r"'obs' depends on the latent site 'mu'.*NUTS"):
        _init(model, jnp.ones(3))


def test_refuses_oracle_site_with_observed_descendant():
    def model():
        x = numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
        numpyro.sample("y", dist.Normal(x.sum(), 1.0), obs=2.0)

    with pytest.raises(
        UnsupportedModelError, match=r"'y' depends on the oracle site 'x'.*observed_mask"
    ):
        _init(model)


def test_refuses_factor_on_latent_sites():
    def model():
        x = numpyro.sample("x", AnyOrderAR(TABLE, N, Q))
        numpyro.factor("penalty", -x.sum())

    with pytest.raises(UnsupportedModelError, match=r"'penalty' depends on the oracle site 'x'"):
        _init(model)


def test_refuses_enumerated_sites():
    def model():
        numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3), infer={"enumerate": "parallel"})
        numpyro.sample("x", AnyOrderAR(TABLE, N, Q))

    with pytest.raises(UnsupportedModelError, match=r"site 'z' is marked for enumeration"):
        _init(model)


def test_observed_values_outside_the_support_name_the_site():
    def infilling():
        numpyro.sample(
            "x",
            AnyOrderAR(
                TABLE, N, Q, observed=np.array([0, 7, 0, 0]), observed_mask=np.ones(N, bool)
            ),
        )

    with pytest.raises(ValueError, match=r"site 'x': value 7 at index 1 is outside the support"):
        _init(infilling)

    def observed():
        numpyro.sample("seen", AnyOrderAR(TABLE, N, Q), obs=np.array([0, 1, 3, 0]))

    with pytest.raises(ValueError, match=r"site 'seen': value 3 at index 2 is outside the support"):
        _init(observed)


def test_refuses_oracle_distributions_in_other_wrappers():
    def model():
        numpyro.sample(
            "y",
            dist.TransformedDistribution(
                StochasticLocalization(lambda t, y: y, 2, np.linspace(0.0, 1.0, 5)),
                dist.transforms.AffineTransform(1.0, 2.0),
            ),
        )

    with pytest.raises(
        UnsupportedModelError,
        match=r"site 'y' wraps StochasticLocalization in TransformedDistribution.*deterministic",
    ):
        _init(model)


def test_refuses_obs_mask_over_the_entries_of_a_draw():
    """NumPyro's obs_mask masks draws (batch dimensions), not entries of one joint draw."""

    def model():
        values = jnp.array([0, 1, 2, 0])
        numpyro.sample("x", AnyOrderAR(TABLE, N, Q), obs=values, obs_mask=values > 0)

    with pytest.raises(
        UnsupportedModelError,
        match=r"site 'x_observed' \(from numpyro.sample\('x', \.\.\., obs_mask=\.\.\.\).*"
        r"shape \(4,\) must select whole draws.*observed_mask=mask\)$",
    ):
        _init(model)


def test_validate_probes_the_oracle():
    def model():
        numpyro.sample("x", AnyOrderAR(lambda x, mask: jnp.zeros((3, 2)), 3, 2))

    with pytest.raises(ValueError, match=r"oracle of site 'x'.*not normalized"):
        _init(model)
    AutospecKernel(model, validate=False).init(jax.random.PRNGKey(0), 0, None, (), {})
