"""Exactness of the round scheduler on stochastic localization (docs/algorithm.md section 2b).

The engine (:func:`numpyro_autospec.engine.run` under ``jax.jit``, all draws of a test sharing
one task pool) must output exactly the law of the sequential Euler-Maruyama chain on the same
grid (:func:`numpyro_autospec.engine.sequential_run`, compiled), whatever the grid.  The
grids here are coarse (N = 8 steps of :func:`default_times`), where the chain is far from its
continuous-time limit -- it puts 0.26 instead of 0.2 on the central point of the 5-point cloud
-- and most speculations are rejected, so the residual loop and every term of both densities
matter.  Two-sample tests, fixed seeds, a test passes when ``p > 1e-4`` (``THRESHOLD``):

* point cloud (5 points in 2-D): chi-square on the nearest cloud point of the output, 3200
  engine draws against 200 000 chain draws (a two-sample test: the effective number of draws
  is ``3200 * 200000 / 203200 = 3150``).  Power (``power_draws`` with that number): 99% to
  detect an absolute error of 0.05 in a cell of probability 0.2.
* Gaussian mixture (3 components in 2-D): Kolmogorov-Smirnov on four 1-D projections of the
  output combined by Bonferroni into one test at ``p = 1e-4`` (each projection at 2.5e-5;
  ``tests/gof.py`` ``assert_projections_agree``), 1200 engine draws against 200 000 chain
  draws (effective number 1193): a difference of 0.102 between the CDFs of one projection is
  caught at power 0.99 (``(K^-1(1 - 2.5e-5) + z_0.99 / 2) / sqrt(1193)``, the largest
  pointwise variance 1/4; 0.069 is only the critical distance, caught at power 0.5).
* a deliberately wrong variant (the target density with variance ``2h`` instead of ``h``;
  ``tests/engine/broken.py``; it moves the central cell from 0.26 to about 0.16) is rejected
  with 3200 draws on the point cloud (1000 are enough: p ~ 5e-8 with 600) and with 1200 on
  the mixture (p <= 2.3e-6 on each projection, 1.3e-12 combined), through the same helpers
  that the exact tests call; so is a speculation whose reported density is not that of its draws.

The first three engine draws are also compared with the reference sampler's for the same
keys (:func:`numpyro_autospec.reference.sample`): the same values (to float32 rounding), at
least the reference's rounds and at most its queries (:func:`assert_draws_are_the_reference`).

One compiled engine program serves a right process and its wrong variant: the process is built
inside ``jax.jit`` with the weight of its error term a traced argument (``error``), 0 for the
exact tests (the package's density plus ``0 * term``, which adds nothing: their first draws
are those of the reference sampler on the package's own process) and 1 for the wrong variant.
Compiling an engine program is most of the cost (about 27 s of CPU each, against about 1.3 s
for 1000 point-cloud draws), so the file compiles five: the frozen drift on the point cloud,
the linear-response speculations on it (a given variance, the posterior covariance read
from the denoiser's Jacobian, and its rank-1 estimate), and the mixture (``slow``).  The
chains' 200 000 draws are shared with tests/processes/test_diffusion.py
(``tests/diffusion_chains.py``).

Reference: Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import Array

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Samples, run
from numpyro_autospec.processes import DiffusionProcess
from tests import diffusion_chains
from tests.diffusion_chains import (
    CHAIN_DRAWS,
    CLOUD,
    CLOUD_PROCESS,
    MIXTURE,
    MIXTURE_PROCESS,
    NUM_STEPS,
    THRESHOLD,
    assert_cloud_law_rejected,
    assert_mixture_law,
    nearest_point,
)
from tests.engine.broken import TargetWithVarianceError
from tests.gof import assert_two_sample, power_draws

#: the paper's recursion on the whole path with residual growth 1 (explicit, so that a new
#: default cannot change what these tests run; with larger batches the engine cancels more
#: trials after an accepted one and does fewer queries than the reference counts, which the
#: draw-for-draw comparison below would flag: the diffusion default rho = 3 gives the same
#: values and rounds, e.g. 485 engine queries against 528 counted by the reference)
CONFIG = SamplerConfig(method="autospec", block_size=None, growth=1.0)

#: s^2 of the linear-response speculation in the tests (the cloud's coordinates have variance
#: 0.16 and 0.15)
LINEAR_RESPONSE_VARIANCE = 0.25


@jax.jit
def cloud_draws(keys: Array, error: Array) -> Samples:
    """Engine draws of :class:`TargetWithVarianceError` on the point cloud: one program for the
    exact draws (``error = 0``) and the wrong ones (``error = 1``)."""
    process = TargetWithVarianceError(CLOUD, 2, CLOUD_PROCESS.times, error=error)
    return run(process, keys, CONFIG)


@jax.jit
def mixture_draws(keys: Array, error: Array) -> Samples:
    """Engine draws of :class:`TargetWithVarianceError` on the mixture: one program for the
    exact draws (``error = 0``) and the wrong ones (``error = 1``)."""
    process = TargetWithVarianceError(MIXTURE, 2, MIXTURE_PROCESS.times, error=error)
    return run(process, keys, CONFIG)


def draws_of(program, seed: int, num_draws: int, error: float) -> tuple[Samples, Array]:
    """``num_draws`` draws of a jitted ``program(keys, error)`` in one call, and their keys."""
    keys = jax.random.split(jax.random.PRNGKey(seed), num_draws)
    samples = program(keys, jnp.float32(error))
    return jax.tree.map(np.asarray, samples), keys


def assert_draws_are_the_reference(process: DiffusionProcess, samples: Samples, keys) -> None:
    """Draw ``i`` of the engine is ``reference.sample(process, keys[i])``.  Its cost is bounded
    by the reference's: the reference counts every trial of a residual batch as running at
    once, while the engine's pool, shared by thousands of draws here, may make a draw wait for
    slots (more rounds: 11 against 10 for a draw of these keys) and start fewer of a batch's
    trials before its winner is known (fewer queries: 33 against 94), never the other way."""
    for i in range(3):
        draw = reference.sample(process, keys[i], CONFIG)
        np.testing.assert_allclose(samples.value[i], draw.value, rtol=1e-5, atol=1e-5)
        assert samples.rounds[i] >= draw.rounds, i
        assert samples.queries[i] <= draw.queries, i


@pytest.fixture(scope="module")
def cloud_chain_categories() -> np.ndarray:
    return diffusion_chains.cloud_chain_categories()


@pytest.fixture(scope="module")
def cloud_engine() -> tuple[Samples, Array]:
    return draws_of(cloud_draws, 2, 3200, error=0.0)


# ------------------------------------------------------------------------------ point cloud
def test_engine_draws_are_the_reference_draws_on_point_cloud(cloud_engine):
    samples, keys = cloud_engine
    assert_draws_are_the_reference(CLOUD_PROCESS, samples, keys)


def test_engine_matches_euler_chain_on_point_cloud(cloud_engine, cloud_chain_categories):
    samples, _ = cloud_engine
    num_draws = samples.rounds.size
    # the power of the two-sample test: its effective number of draws, not the engine's
    effective = num_draws * CHAIN_DRAWS / (num_draws + CHAIN_DRAWS)
    assert power_draws(0.05, 0.2, num_cells=5) <= effective
    # the grid is coarse: the chain's law is visibly not uniform over the 5 points
    chain_law = np.bincount(cloud_chain_categories, minlength=5) / CHAIN_DRAWS
    assert chain_law[4] > 0.25
    assert_two_sample(
        nearest_point(samples.value),
        cloud_chain_categories,
        threshold=THRESHOLD,
        label="engine vs Euler chain, point cloud",
    )
    # the residual loop ran (more queries than a sequential draw), yet fewer rounds on average
    assert samples.queries.mean() > NUM_STEPS + 1
    assert samples.rounds.mean() < NUM_STEPS + 1


# ------------------------------------------------------------------------------ mixture
@pytest.mark.slow
def test_engine_matches_euler_chain_on_gaussian_mixture():
    samples, keys = draws_of(mixture_draws, 3, 1200, error=0.0)
    assert_draws_are_the_reference(MIXTURE_PROCESS, samples, keys)
    assert_mixture_law(samples.value, "engine vs Euler chain")


@pytest.mark.slow
def test_mixture_test_rejects_a_wrong_target_density():
    """The same KS tests, on 1200 draws of the same compiled program with the target density
    of the wrong variance (``error = 1``), fail (measured: p = 2.4e-8, 3.3e-13, 2.3e-6 and 1.8e-7
    on the four projections, 1.3e-12 combined; the right draws, same keys and program: 0.34,
    0.16, 0.50, 0.99, 0.64 combined)."""
    samples, _ = draws_of(mixture_draws, 3, 1200, error=1.0)
    with pytest.raises(AssertionError, match="projected Kolmogorov-Smirnov failed"):
        assert_mixture_law(samples.value, "broken engine")


# ------------------------------------------------------------------------------ power
@pytest.mark.slow
def test_harness_rejects_a_wrong_target_density(cloud_chain_categories):
    """The same two-sample test, on 3200 draws of a process whose target density has the
    wrong variance, fails: the residual loop then corrects toward the wrong law."""
    samples, _ = draws_of(cloud_draws, 2, 3200, error=1.0)
    assert_cloud_law_rejected(samples.value, cloud_chain_categories)


# ------------------------------------------------------------------------------ speculations
#: the linear-response speculations (``speculation_variance``, ``posterior_rank``): a given
#: variance, the posterior covariance read from the denoiser's Jacobian, and its rank-1
#: estimate (the frozen drift in the other direction); other speculations, the same law
RESPONSES = {
    "given-variance": (LINEAR_RESPONSE_VARIANCE, None),
    "posterior-covariance": ("posterior", None),
    "posterior-rank-1": ("posterior", 1),
}


class LinearResponseWithDensityError(DiffusionProcess):
    """The linear-response speculation whose reported density (``spec_logp``) is its own plus
    ``error`` (traced) times (the frozen drift's density minus its own).  ``error = 0``: the
    package's density (plus ``0 * term``, which adds nothing).  ``error = 1``, wrong on purpose:
    draws the linear-response speculation but reports the frozen drift's density for it, so
    that ``mu / nu`` is not the density ratio of what was drawn."""

    def __init__(self, *args, error, **kwargs):
        super().__init__(*args, **kwargs)
        self.error = error

    def spec_logp(self, x, a, m, answer, max_length=None):
        own = super().spec_logp(x, a, m, answer, max_length)
        frozen = CLOUD_PROCESS.spec_logp(x, a, m, answer, max_length)  # same grid, frozen drift
        return own + self.error * (frozen - own)


@functools.partial(jax.jit, static_argnames=("variance", "rank"))
def linear_cloud_draws(keys: Array, error: Array, variance, rank) -> Samples:
    """Engine draws of :class:`LinearResponseWithDensityError` on the point cloud: one program
    per ``variance`` and ``rank`` for the exact draws (``error = 0``) and the wrong ones
    (``error = 1``)."""
    process = LinearResponseWithDensityError(
        CLOUD,
        2,
        CLOUD_PROCESS.times,
        speculation_variance=variance,
        posterior_rank=rank,
        error=error,
    )
    return run(process, keys, CONFIG)


@pytest.mark.parametrize("response", list(RESPONSES))
def test_engine_with_linear_response_speculation_matches_euler_chain(
    response, cloud_chain_categories
):
    """The speculation changes the rounds, never the law: 3200 engine draws with a
    linear-response speculation against the chain (same power as the frozen drift's test)."""
    variance, rank = RESPONSES[response]
    program = functools.partial(linear_cloud_draws, variance=variance, rank=rank)
    samples, keys = draws_of(program, 5, 3200, error=0.0)
    process = DiffusionProcess(
        CLOUD, 2, CLOUD_PROCESS.times, speculation_variance=variance, posterior_rank=rank
    )
    assert_draws_are_the_reference(process, samples, keys)
    assert_two_sample(
        nearest_point(samples.value),
        cloud_chain_categories,
        threshold=THRESHOLD,
        label=f"engine with the linear-response speculation ({response}) vs Euler chain",
    )
    assert samples.queries.mean() > NUM_STEPS + 1  # the residual loop ran


@pytest.mark.slow
@pytest.mark.parametrize("response", list(RESPONSES))
def test_harness_rejects_a_speculation_with_the_wrong_density(response, cloud_chain_categories):
    """The same test fails when the speculation's reported density is not that of its draws."""
    variance, rank = RESPONSES[response]
    program = functools.partial(linear_cloud_draws, variance=variance, rank=rank)
    samples, _ = draws_of(program, 5, 3200, error=1.0)
    assert_cloud_law_rejected(samples.value, cloud_chain_categories)
