"""The two diffusion targets of the exactness tests and the sequential Euler-Maruyama chain's
law on each, the reference law of ``tests/engine/test_diffusion.py`` (the engine) and
``tests/processes/test_diffusion.py`` (the reference sampler).

Nothing here is a test.  The chains are 200 000 draws each, computed once per test process
(``functools.cache``) whichever file asks first: a 5-point cloud and a 3-component Gaussian
mixture in 2-D on a coarse grid of ``NUM_STEPS`` steps of :func:`default_times`.  The
two-sample checks against them that both files make are here too (:func:`assert_mixture_law`,
:func:`assert_cloud_law_rejected`; a test passes when ``p > THRESHOLD``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec.denoisers import GaussianMixtureDenoiser, PointCloudDenoiser
from numpyro_autospec.engine import sequential_run
from numpyro_autospec.processes import DiffusionProcess, default_times
from tests.gof import assert_projections_agree, assert_two_sample, two_sample_chisquare

#: a two-sample test against a chain passes when ``p > THRESHOLD``
THRESHOLD = 1e-4

NUM_STEPS = 8
CHAIN_DRAWS = 200_000
CLOUD = PointCloudDenoiser(
    jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.4]], jnp.float32)
)
MIXTURE = GaussianMixtureDenoiser(
    jnp.array([0.5, 0.3, 0.2]),
    jnp.array([[-1.0, 0.0], [1.0, 0.5], [0.0, 1.5]]),
    jnp.array(
        [
            [[0.3, 0.1], [0.1, 0.2]],
            [[0.1, 0.0], [0.0, 0.4]],
            [[0.05, 0.0], [0.0, 0.05]],
        ]
    ),
)
CLOUD_TIMES = default_times(NUM_STEPS, 30.0)
MIXTURE_TIMES = default_times(NUM_STEPS, 10.0)
# one process object per target: the reference sampler compiles once per process
CLOUD_PROCESS = DiffusionProcess(CLOUD, 2, CLOUD_TIMES)
MIXTURE_PROCESS = DiffusionProcess(MIXTURE, 2, MIXTURE_TIMES)
#: the directions of the 1-D projections on which the mixture's draws are compared
PROJECTIONS = ([1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, -0.6])


def chain_draws(process: DiffusionProcess, seed: int, num_draws: int = CHAIN_DRAWS) -> np.ndarray:
    """Outputs :math:`f(t_N, y_N)` of the sequential Euler-Maruyama chain
    (:func:`~numpyro_autospec.engine.sequential_run`, compiled) for the keys
    ``split(PRNGKey(seed), num_draws)``."""
    keys = jax.random.split(jax.random.PRNGKey(seed), num_draws)
    return np.asarray(jax.jit(lambda k: sequential_run(process, k).value)(keys))


def nearest_point(values) -> np.ndarray:
    """Index of the cloud point nearest to each output (the category of the draw)."""
    return np.asarray(jax.jit(jax.vmap(CLOUD.nearest))(jnp.asarray(values)))


@functools.cache
def cloud_chain_categories() -> np.ndarray:
    """The nearest cloud point of ``CHAIN_DRAWS`` chain draws on the point cloud."""
    return nearest_point(chain_draws(CLOUD_PROCESS, 1))


@functools.cache
def mixture_chain() -> np.ndarray:
    """``CHAIN_DRAWS`` chain draws on the Gaussian mixture, ``float32[CHAIN_DRAWS, 2]``."""
    return chain_draws(MIXTURE_PROCESS, 4)


def assert_mixture_law(values, label) -> None:
    """The two-sample KS tests of ``values`` against :func:`mixture_chain` on the four
    projections (``PROJECTIONS``), one check at ``THRESHOLD`` (Bonferroni over the four)."""
    assert_projections_agree(
        values, mixture_chain(), PROJECTIONS, threshold=THRESHOLD, label=f"{label}, mixture"
    )


def assert_cloud_law_rejected(values, chain_categories) -> None:
    """The two-sample chi-square of the nearest cloud points of ``values`` against the chain's
    (``chain_categories``) rejects them at ``p < 1e-8``, and :func:`assert_two_sample` at
    ``THRESHOLD`` fails on them."""
    categories = nearest_point(values)
    result = two_sample_chisquare(categories, chain_categories)
    assert result.p_value < 1e-8, result
    with pytest.raises(AssertionError, match="two-sample chi-square failed"):
        assert_two_sample(categories, chain_categories, threshold=THRESHOLD)
