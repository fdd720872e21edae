r"""The learned denoiser (:mod:`numpyro_autospec.learned._denoiser`): protocol, errors, training,
and exactness of autospeculation with it (docs/algorithm.md section 2b).

Exactness with a learned denoiser means: the engine's autospeculative draws have exactly the law
of the Euler-Maruyama chain *of the same network* on the same grid
(:func:`numpyro_autospec.engine.sequential_run`), not the law of the data.  The check is a
two-sample Kolmogorov-Smirnov test on four one-dimensional projections of the 64-pixel output
(the first three principal axes of the digits and the mean pixel), fixed seeds, combined by
Bonferroni into one test that passes when ``p > 1e-4`` (``THRESHOLD``; each projection at
2.5e-5; ``tests/gof.py`` ``assert_projections_agree``): ``ENGINE_DRAWS`` engine draws against
``CHAIN_DRAWS`` chain draws.  At these sizes (3000 against 30 000, an effective number of 2727
draws) KS catches a difference of 0.068 between the CDFs of one projection at power 0.99
(``(K^-1(1 - 2.5e-5) + z_0.99 / 2) / sqrt(2727)``, the largest pointwise variance 1/4; 0.045
is only the critical distance, caught at power 0.5), and only on those four projections.  The same
test, with the same numbers of draws, rejects the engine's draws with a broken target density
(:class:`tests.engine.broken.TargetWithVarianceError` with ``error = WRONG_ERROR``: the
acceptance tests and the residual trials read a step density of 0.87 times the variance),
drawn by the same compiled program as the correct draws (the error a traced weight).  (A
subtler error, the chain with its noise scaled by 1.1, is *not* caught at these sizes: p from
0.003 to 0.24 on the four projections, 0.012 combined.)

The network is tiny (two hidden layers of 32 units, ``TRAINING_STEPS`` Adam steps on the
scikit-learn digits, about 5 s) and the grid coarse (``NUM_STEPS`` steps of
:func:`default_times`), so most speculations are rejected and the residual loop runs: every
term of both densities matters.  The engine takes the network as an argument of ``jax.jit``
(its weights traced: parameters are data).
"""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")
pytest.importorskip("sklearn")

import functools  # noqa: E402

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402

from numpyro_autospec import AutospecKernel, StochasticLocalization, reference  # noqa: E402
from numpyro_autospec.config import SamplerConfig  # noqa: E402
from numpyro_autospec.denoisers import Denoiser, digits_point_cloud, validate_denoiser
from numpyro_autospec.engine import run  # noqa: E402
from numpyro_autospec.engine._sequential import sequential_run  # noqa: E402
from numpyro_autospec.errors import DenoiserError
from numpyro_autospec.learned import LearnedDenoiser
from numpyro_autospec.learned._denoiser import data_statistics
from numpyro_autospec.processes import DiffusionProcess  # noqa: E402
from numpyro_autospec.processes._time_grids import default_times  # noqa: E402
from tests.engine.broken import TargetWithVarianceError  # noqa: E402
from tests.gof import assert_projections_agree  # noqa: E402

from support.denoiser_training import (  # noqa: E402
    DenoiserConfig,
    denoising_loss,
    load_or_train_denoiser,
    train_denoiser,
)

THRESHOLD = 1e-4
NUM_STEPS = 16
TRAINING_STEPS = 300
ENGINE_DRAWS = 3000
CHAIN_DRAWS = 30_000
#: the broken sampler's error weight: the step density read with variance ``h / (1 + 0.15)``,
#: 0.87 times the step's (measured on the test's 3000 draws: combined p = 1.9e-29, with 0.78x
#: the right draws' queries; the opposite error, ``0.3``, a variance of 1.18 times the step's,
#: also fails the test but costs 2.1x the right draws' queries: 41 s of drawing against 5 s)
WRONG_ERROR = -0.3
#: the paper's recursion on the whole path, as in tests/engine/test_diffusion.py
CONFIG = SamplerConfig(method="autospec", block_size=None)
TIMES = default_times(NUM_STEPS)


@functools.cache
def digits() -> np.ndarray:
    return np.asarray(digits_point_cloud().points, np.float32)


def fresh_network(seed: int = 0) -> LearnedDenoiser:
    mean, scale = data_statistics(digits())
    return LearnedDenoiser(64, mean, scale, hidden_size=32, depth=2, key=jax.random.PRNGKey(seed))


@functools.cache
def trained() -> tuple[LearnedDenoiser, np.ndarray]:
    return train_denoiser(
        jax.random.PRNGKey(1),
        fresh_network(),
        digits(),
        TRAINING_STEPS,
        batch_size=64,
        learning_rate=3e-3,
        progress_bar=False,
    )


@functools.cache
def projections() -> np.ndarray:
    """``[64, 4]``: the first three principal axes of the digits and the mean pixel."""
    centered = digits() - digits().mean(axis=0)
    axes = np.linalg.svd(centered, full_matrices=False)[2][:3].T
    return np.concatenate([axes, np.full((64, 1), 1.0 / 64)], axis=1)


def chain_draws(process: DiffusionProcess, seed: int) -> np.ndarray:
    """``CHAIN_DRAWS`` outputs of the sequential Euler-Maruyama chain of ``process``."""
    keys = jax.random.split(jax.random.PRNGKey(seed), CHAIN_DRAWS)
    return np.asarray(jax.jit(lambda k: sequential_run(process, k).value)(keys))


@functools.cache
def network_chain() -> np.ndarray:
    return chain_draws(DiffusionProcess(trained()[0], 64, TIMES), 3)


@jax.jit
def engine_draws(network, keys, error):
    """Engine draws of :class:`TargetWithVarianceError` with the network, both traced: one
    program for the exact draws (``error = 0``) and the wrong ones (``error = WRONG_ERROR``)."""
    return run(TargetWithVarianceError(network, 64, TIMES, error=error), keys, CONFIG)


@functools.cache
def engine_samples(error: float = 0.0):
    """``ENGINE_DRAWS`` engine draws (one pool), and the keys."""
    keys = jax.random.split(jax.random.PRNGKey(2), ENGINE_DRAWS)
    samples = engine_draws(trained()[0], keys, jnp.float32(error))
    return jax.tree.map(np.asarray, samples), keys


def assert_same_law(draws: np.ndarray, chain: np.ndarray, label: str) -> None:
    assert_projections_agree(draws, chain, projections().T, threshold=THRESHOLD, label=label)


# ------------------------------------------------------------------------------ protocol
def test_network_is_a_denoiser_and_passes_validation():
    network = trained()[0]
    assert isinstance(network, Denoiser) and network.dim == 64
    validate_denoiser(network, 64, TIMES)
    outputs = jax.vmap(network)(jnp.asarray(TIMES), jnp.ones((NUM_STEPS + 1, 64)))
    assert outputs.shape == (NUM_STEPS + 1, 64) and outputs.dtype == jnp.float32
    site = StochasticLocalization(network, dim=64, times=TIMES)
    weights = set(map(id, jax.tree.leaves(network)))
    assert weights <= set(map(id, jax.tree.leaves(site)))  # the weights are data of the site


def test_autospec_kernel_samples_a_learned_site():
    """``MCMC(AutospecKernel(model))`` on a ``StochasticLocalization`` site of the network."""
    network = trained()[0]

    def model():
        numpyro.sample("digit", StochasticLocalization(network, dim=64, times=TIMES))

    mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=3, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(6), extra_fields=("rounds", "queries"))
    draws, rounds = mcmc.get_samples()["digit"], mcmc.get_extra_fields()["rounds"]
    # the draws are known: the reference's for the key of the site (the kernel splits its key
    # once per draw, handlers.seed the draw's key once per site)
    process = DiffusionProcess(network, 64, TIMES)
    state_key = jax.random.PRNGKey(6)
    for draw, draw_rounds in zip(np.asarray(draws), np.asarray(rounds), strict=True):
        state_key, draw_key = jax.random.split(state_key)
        expected = reference.sample(process, jax.random.split(draw_key)[1])
        np.testing.assert_allclose(draw, expected.value, rtol=1e-4, atol=1e-4)
        assert draw_rounds == expected.rounds


def test_untrained_network_is_the_gaussian_proxy_denoiser():
    """With its last layer at zero the network is the exact denoiser of independent
    :math:`\\mathcal{N}(m_i, s_i^2)` coordinates: :math:`(m + s^2 y) / (1 + s^2 t)`."""
    network = fresh_network()
    mean, scale = data_statistics(digits())
    generator = np.random.default_rng(0)
    for t in (0.0, 0.3, 10.0, 1000.0):
        y = t * digits()[7] + np.sqrt(t) * generator.standard_normal(64)
        expected = (mean + scale**2 * y) / (1.0 + scale**2 * t)
        np.testing.assert_allclose(network(t, y), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(trained()[0](10.0, y), network(10.0, y), atol=1e-3)


def test_bad_input_raises_named_errors():
    mean, scale = data_statistics(digits())
    key = jax.random.PRNGKey(0)
    with pytest.raises(DenoiserError, match=r"data_mean\[3\] = nan"):
        LearnedDenoiser(64, np.where(np.arange(64) == 3, np.nan, mean), scale, key=key)
    with pytest.raises(DenoiserError, match=r"data_scale must be at least 0, got data_scale\[0\]"):
        LearnedDenoiser(64, mean, -np.ones(64), key=key)
    with pytest.raises(DenoiserError, match=r"data_mean must have shape \(64,\), got \(63,\)"):
        LearnedDenoiser(64, mean[:63], scale, key=key)
    with pytest.raises(DenoiserError, match="depth must be a positive integer, got 0"):
        LearnedDenoiser(64, mean, scale, depth=0, key=key)
    with pytest.raises(DenoiserError, match=r"y of shape \(64,\).*got shapes \(\) and \(2, 64\)"):
        fresh_network()(1.0, jnp.zeros((2, 64)))
    bad_data = np.zeros((4, 64))
    bad_data[1, 2] = np.inf
    with pytest.raises(DenoiserError, match=r"data must be finite, got data\[1, 2\] = inf"):
        train_denoiser(key, fresh_network(), bad_data, 1)
    with pytest.raises(DenoiserError, match=r"64 columns .* got \(10, 8\)"):
        train_denoiser(key, fresh_network(), np.zeros((10, 8)), 1)
    with pytest.raises(DenoiserError, match="every coordinate of data is constant"):
        train_denoiser(key, fresh_network(), np.ones((5, 64)), 1)
    with pytest.raises(ValueError, match="num_steps must be a positive integer, got 0"):
        train_denoiser(key, fresh_network(), digits(), 0)


def test_invalid_outputs_are_caught_by_the_validation():
    network = trained()[0]
    broken = eqx.tree_at(
        lambda n: n.layers[0].bias, network, network.layers[0].bias.at[0].set(jnp.nan)
    )
    with pytest.raises(DenoiserError, match="returned NaN"):
        validate_denoiser(broken, 64, TIMES)


# ------------------------------------------------------------------------------ training
def test_training_lowers_the_loss():
    network, losses = trained()
    assert losses.shape == (TRAINING_STEPS,) and np.all(np.isfinite(losses))
    key = jax.random.PRNGKey(5)
    batch = jnp.asarray(np.tile(digits(), (4, 1)))  # every image, four noise draws each
    before = float(denoising_loss(fresh_network(), key, batch))
    after = float(denoising_loss(network, key, batch))
    assert after < 0.95 * before, (before, after)
    assert losses[-50:].mean() < losses[:50].mean()


def test_training_is_cached_once(tmp_path):
    config = DenoiserConfig(64, hidden_size=8, depth=1, num_frequencies=2)
    arguments = dict(num_steps=3, batch_size=8, cache=tmp_path, progress_bar=False)
    first, metadata, directory = load_or_train_denoiser("tiny", config, digits(), **arguments)
    again, cached, same = load_or_train_denoiser("tiny", config, digits(), **arguments)
    assert not metadata["loaded_from_cache"] and cached["loaded_from_cache"] and same == directory
    assert set(cached) >= {"seconds", "first_loss", "final_loss"}
    for left, right in zip(jax.tree.leaves(first), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(left, right)


# ------------------------------------------------------------------------------ exactness
def test_engine_draws_are_the_reference_draws():
    samples, keys = engine_samples()
    process = DiffusionProcess(trained()[0], 64, TIMES)
    draw = reference.sample(process, keys[0], CONFIG)
    np.testing.assert_allclose(samples.value[0], draw.value, rtol=1e-4, atol=1e-4)
    assert samples.rounds[0] == draw.rounds
    assert samples.queries[0] <= draw.queries  # the engine cancels the losing trials


def test_autospec_matches_the_euler_chain_of_the_same_network():
    samples, _ = engine_samples()
    chain = network_chain()
    assert_same_law(samples.value, chain, "autospec vs Euler chain of the network")
    # speculations were rejected and corrected: more queries than the chain's N + 1
    assert samples.queries.mean() > NUM_STEPS + 1


def test_the_same_test_rejects_a_wrong_sampler():
    """The engine's ``ENGINE_DRAWS`` draws with the target density's variance 0.87 times the
    step's in its acceptance tests (``error = WRONG_ERROR``, the program of the exact draws)
    fail the test."""
    wrong, _ = engine_samples(WRONG_ERROR)
    with pytest.raises(AssertionError, match="projected Kolmogorov-Smirnov failed"):
        assert_same_law(wrong.value, network_chain(), "broken engine vs Euler chain")
