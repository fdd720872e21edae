"""Tests of the diffusion (stochastic localization) process.

Unit checks compare every method with direct float64 numpy formulas.  Exactness compares the
reference autospeculative sampler with the sequential Euler-Maruyama chain on the same coarse
grid (N = 8, where the chain is far from its continuous-time limit -- its law over the 5-point
cloud puts 0.26 instead of 0.2 on the central point -- and almost every speculation is
rejected, so the residual loop and every density term matter): the nearest-point category of
the output for a 5-point cloud in 2-D (two-sample chi-square) and 1-D projections of the output
for a 2-D Gaussian mixture (two-sample Kolmogorov-Smirnov).  Seeds are fixed; a test passes
when p > 1e-4.

The sequential side is the reference's ``method="sequential"`` sampler, shown draw for draw
equal to a vectorized replica of it (``euler_chain``) and to the package's compiled chain,
which supplies 200 000 draws at no cost (``tests/diffusion_chains.py``, computed once for
this file and ``tests/engine/test_diffusion.py``): the two-sample tests have almost the
power of one-sample tests against the exact law of the chain, and that power is set by the
reference's draws (slow Python, ~10 ms of CPU each at N = 8 for the cloud, ~20 ms for the
mixture).  Power at p > 1e-4:

* point cloud, 1200 draws against 200 000, 5 cells (a two-sample test: the effective number
  of draws is ``1200 * 200000 / 201200 = 1193``): 99% to detect an absolute error of 0.081 in
  a cell of probability 0.2 (``power_draws`` with the effective number);
* mixture, 500 draws against 200 000 (effective number 499), KS on four projections
  combined by Bonferroni into one test at p = 1e-4 (each at 2.5e-5): a difference of 0.158
  between the CDFs of one projection is caught at power 0.99 (``(K^-1(1 - 2.5e-5) +
  z_0.99 / 2) / sqrt(499)``, the largest pointwise variance 1/4); 0.106 is only the critical
  distance, caught at power 0.5.

A deliberately wrong variant (the target density without the h-dependence of its normalizing
constant) is rejected with 200 draws at p ~ 1e-86 on the point cloud and with the mixture's
500 (its four KS tests: p from 3.1e-12 to 4.3e-4, 1.2e-11 combined).  Another, the target
density with variance 2h, is subtler (it shifts the central cell from 0.26 to 0.16): it was
rejected at p ~ 1e-7 with 600 draws, too slow to run here.
"""

import copy
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from numpyro_autospec import reference
from numpyro_autospec.config import DIFFUSION_GROWTH, SamplerConfig
from numpyro_autospec.denoisers import GaussianMixtureDenoiser, digits_point_cloud
from numpyro_autospec.errors import DenoiserError, InputError
from numpyro_autospec.processes import DiffusionProcess, Process
from numpyro_autospec.processes import _linear_response as linear_response
from numpyro_autospec.processes._diffusion import DiffusionState
from numpyro_autospec.processes._time_grids import DEFAULT_T_MAX, default_times, uniform_times
from tests.diffusion_chains import (
    CLOUD,
    CLOUD_PROCESS,
    CLOUD_TIMES,
    MIXTURE,
    MIXTURE_PROCESS,
    MIXTURE_TIMES,
    NUM_STEPS,
    THRESHOLD,
    assert_cloud_law_rejected,
    assert_mixture_law,
    chain_draws,
    cloud_chain_categories,
    nearest_point,
)
from tests.gof import assert_projections_agree, assert_two_sample, power_draws


def euler_chain(process, keys):
    """The reference's sequential draw, vectorized: same keys, same steps, same output."""

    def one(key):
        k_init, k_run = jax.random.split(key)
        block_key = jax.random.fold_in(k_run, 0)

        def step(k, x):
            return process.target_sample(
                jax.random.fold_in(block_key, k), x, k, process.query(x, k)
            )

        x = jax.lax.fori_loop(0, process.num_steps, step, process.init(k_init))
        return process.output(x, process.query(x, process.num_steps))

    return np.asarray(jax.jit(jax.vmap(one))(keys))


def random_path(seed, num_steps=NUM_STEPS, dim=2):
    rng = np.random.default_rng(seed)
    path = np.cumsum(rng.normal(size=(num_steps + 1, dim)), axis=0)
    path[0] = 0.0
    return DiffusionState(path=jnp.asarray(path, jnp.float32))


def speculation_noise(key, num_steps=NUM_STEPS, dim=2) -> np.ndarray:
    """The standard normal noise a speculation drawn with ``key`` uses: row ``k`` from
    ``fold_in(key, k)``, whatever window holds the block."""
    rows = [jax.random.normal(jax.random.fold_in(key, k), (dim,)) for k in range(num_steps)]
    return np.asarray(rows, np.float64)


def gaussian_log_density(value, mean, variance):
    value, mean = np.asarray(value, np.float64), np.asarray(mean, np.float64)
    return -0.5 * value.size * np.log(2 * np.pi * variance) - 0.5 * np.sum(
        (value - mean) ** 2
    ) / float(variance)


# ------------------------------------------------------------------------------ construction
def test_process_protocol_and_shapes():
    process = CLOUD_PROCESS
    assert isinstance(process, Process)
    assert process.num_steps == NUM_STEPS and process.final_query and process.dim == 2
    x = process.init(jax.random.PRNGKey(0))
    assert x.path.shape == (NUM_STEPS + 1, 2) and x.path.dtype == jnp.float32
    assert not np.any(np.asarray(x.path))
    np.testing.assert_allclose(process.query(x, 0), CLOUD.mean, rtol=1e-6)
    np.testing.assert_allclose(
        process.step_sizes, np.diff(CLOUD_TIMES.astype(np.float64)), rtol=1e-7
    )


def test_constructor_errors_name_the_site():
    with pytest.raises(DenoiserError, match="'pixels'.*start at 0"):
        DiffusionProcess(CLOUD, 2, [0.5, 1.0], name="pixels")
    with pytest.raises(DenoiserError, match="'pixels'.*strictly increasing"):
        DiffusionProcess(CLOUD, 2, [0.0, 1.0, 1.0], name="pixels")
    with pytest.raises(DenoiserError, match="'pixels'.*one-dimensional"):
        DiffusionProcess(CLOUD, 2, np.zeros((2, 2)), name="pixels")
    with pytest.raises(DenoiserError, match="'pixels'"):
        DiffusionProcess(CLOUD, 3, [0.0, 1.0], name="pixels")  # CLOUD.dim is 2
    with pytest.raises(DenoiserError, match="'pixels'.*float32\\[2\\]"):
        DiffusionProcess(lambda t, y: jnp.zeros(3), 2, [0.0, 1.0], name="pixels")
    for variance in (0.0, -1.0, float("nan"), [0.1, 0.2], "Posterior", "auto"):
        with pytest.raises(DenoiserError, match="'pixels'.*speculation_variance"):
            DiffusionProcess(CLOUD, 2, [0.0, 1.0], name="pixels", speculation_variance=variance)
    for variance, rank in ((None, 1), (0.1, 1), ("posterior", 0), ("posterior", 1.0)):
        with pytest.raises(DenoiserError, match="'pixels'.*posterior_rank"):
            DiffusionProcess(
                CLOUD,
                2,
                [0.0, 1.0],
                name="pixels",
                speculation_variance=variance,
                posterior_rank=rank,
            )


def test_time_grids():
    np.testing.assert_allclose(uniform_times(4, 2.0), [0.0, 0.5, 1.0, 1.5, 2.0])
    times = default_times(16, 1000.0, data_variance=0.25)
    assert times.dtype == np.float32 and times[0] == 0.0 and times[-1] == 1000.0
    assert np.all(np.diff(times) > 0)
    # uniform in log(1 + sigma^2 t): equal steps there, growing steps in t
    np.testing.assert_allclose(
        np.diff(np.log1p(0.25 * times.astype(np.float64))), np.log(251) / 16, rtol=1e-5
    )
    assert np.diff(times)[-1] > 100 * np.diff(times)[0]
    for bad, message in (
        (lambda: default_times(0), "num_steps must be a positive integer, got 0"),
        (lambda: default_times(8, -1.0), "t_max must be positive and finite, got -1.0"),
        (
            lambda: default_times(8, data_variance=0.0),
            "data_variance must be positive and finite, got 0.0",
        ),
        (lambda: uniform_times(8, float("inf")), "t_max must be positive and finite, got inf"),
    ):
        with pytest.raises(ValueError, match=f"^{message}$"):
            bad()


# ------------------------------------------------------------------------------ methods
def test_target_step_and_density_match_numpy():
    process, x, k = CLOUD_PROCESS, random_path(0), 3
    drift = process.query(x, k)
    np.testing.assert_allclose(drift, CLOUD(CLOUD_TIMES[k], x.path[k]))
    assert process.reduce(x, k, drift) is drift
    h = np.float64(CLOUD_TIMES[k + 1]) - np.float64(CLOUD_TIMES[k])
    key = jax.random.PRNGKey(1)
    stepped = process.target_sample(key, x, k, drift)
    expected = (
        np.asarray(x.path[k], np.float64)
        + h * np.asarray(drift, np.float64)
        + np.sqrt(h) * np.asarray(jax.random.normal(key, (2,)), np.float64)
    )
    np.testing.assert_allclose(stepped.path[k + 1], expected, rtol=1e-5, atol=1e-6)
    untouched = np.arange(NUM_STEPS + 1) != k + 1
    np.testing.assert_array_equal(stepped.path[untouched], x.path[untouched])
    # the density of whatever row k+1 holds: N(y_{k+1}; y_k + h f, h I), full constant
    for state in (x, stepped):
        np.testing.assert_allclose(
            process.target_logp(state, k, drift),
            gaussian_log_density(state.path[k + 1], state.path[k] + h * np.asarray(drift), h),
            rtol=1e-5,
        )


def test_speculated_block_matches_numpy():
    process, x, a, m = CLOUD_PROCESS, random_path(2), 2, 4
    frozen = process.query(x, a)
    key = jax.random.PRNGKey(3)
    speculated = process.spec_sample(key, x, a, m, frozen)
    noise = speculation_noise(key)
    times = CLOUD_TIMES.astype(np.float64)
    expected = np.asarray(x.path[a], np.float64)
    for k in range(a, a + m):  # the Euler recursion with the drift frozen at O_a
        h = times[k + 1] - times[k]
        expected = expected + h * np.asarray(frozen, np.float64) + np.sqrt(h) * noise[k]
        np.testing.assert_allclose(speculated.path[k + 1], expected, rtol=1e-5, atol=1e-5)
    assert_speculation_densities(
        process, x, speculated, (a, m), frozen, noise, lambda k, y: np.asarray(frozen), 1e-5
    )


def assert_speculation_densities(process, x, speculated, block, frozen, noise, drift, rtol):
    """The speculated block ``(a, m)`` leaves the rest of the path as it was; ``spec_logp`` is
    the Euler density of ``drift(k, y_k)`` over the block, for the path before and after; and
    it is the density of the standard normal noise that ``spec_sample`` drew."""
    a, m = block
    times = CLOUD_TIMES.astype(np.float64)
    outside = (np.arange(NUM_STEPS + 1) <= a) | (np.arange(NUM_STEPS + 1) > a + m)
    np.testing.assert_array_equal(speculated.path[outside], x.path[outside])
    for state in (x, speculated):
        path = np.asarray(state.path, np.float64)
        expected_logp = sum(
            gaussian_log_density(
                path[k + 1],
                path[k] + (times[k + 1] - times[k]) * drift(k, path[k]),
                times[k + 1] - times[k],
            )
            for k in range(a, a + m)
        )
        np.testing.assert_allclose(process.spec_logp(state, a, m, frozen), expected_logp, rtol=rtol)
    standard = sum(
        -np.log(2 * np.pi * (times[k + 1] - times[k])) - 0.5 * np.sum(noise[k] ** 2)
        for k in range(a, a + m)
    )
    np.testing.assert_allclose(process.spec_logp(speculated, a, m, frozen), standard, rtol=rtol)


def test_linear_response_speculation_matches_numpy():
    """The linear-response speculation against its recursion in float64: drift
    ``O_a + c_k z_k``, ``c_k = s^2 / (1 + s^2 t_k)``, ``z_k = y_k - y_a - (t_k - t_a) O_a``."""
    variance = 0.3
    process = DiffusionProcess(CLOUD, 2, CLOUD_TIMES, speculation_variance=variance)
    x, a, m = random_path(21), 2, 5
    frozen = np.asarray(process.query(x, a), np.float64)
    key = jax.random.PRNGKey(22)
    speculated = process.spec_sample(key, x, a, m, jnp.asarray(frozen, jnp.float32))
    noise = speculation_noise(key)
    times = CLOUD_TIMES.astype(np.float64)
    start = np.asarray(x.path[a], np.float64)
    expected = start

    def drift(k, y):
        return frozen + variance / (1 + variance * times[k]) * (
            y - start - (times[k] - times[a]) * frozen
        )

    for k in range(a, a + m):
        h = times[k + 1] - times[k]
        expected = expected + h * drift(k, expected) + np.sqrt(h) * noise[k]
        np.testing.assert_allclose(speculated.path[k + 1], expected, rtol=1e-4, atol=1e-4)
    assert_speculation_densities(process, x, speculated, (a, m), frozen, noise, drift, 1e-4)


class UnclampedWindow(DiffusionProcess):
    """A wrong bounded speculation: its window starts at the block's start even where fewer
    than ``max_length`` steps remain, so ``dynamic_slice`` moves it and the rows it reads and
    writes are not the block's."""

    def _window(self, a, max_length):
        length = self.num_steps if max_length is None else int(max_length)
        return a, a + jnp.arange(length)


BOUNDED_CASES = [(0, 8), (0, 3), (2, 4), (5, 3), (6, 2), (7, 1)]


def bounded_speculation_errors(process, blocks=BOUNDED_CASES) -> float:
    """The largest difference between ``spec_sample`` / ``spec_logp`` with every bound
    ``max_length`` from ``m`` to ``N`` and without one, over the blocks ``(a, m)``."""
    x = random_path(31)
    worst = 0.0
    for a, m in blocks:
        answer = process.query(x, a)
        key = jax.random.PRNGKey(32 + a)
        whole = process.spec_sample(key, x, a, m, answer)
        whole_logp = float(process.spec_logp(whole, a, m, answer))
        for bound in range(m, NUM_STEPS + 1):
            bounded = process.spec_sample(key, x, a, m, answer, max_length=bound)
            worst = max(worst, float(jnp.max(jnp.abs(bounded.path - whole.path))))
            logp = float(process.spec_logp(whole, a, m, answer, max_length=bound))
            worst = max(worst, abs(logp - whole_logp) / (1.0 + abs(whole_logp)))
    return worst


SPECULATIONS = [(None, None), (0.3, None), ("posterior", None), ("posterior", 1)]


@pytest.mark.parametrize(
    ("variance", "rank"), SPECULATIONS, ids=["frozen", "linear", "posterior", "posterior-rank-1"]
)
def test_bounded_speculation_is_the_whole_one(variance, rank):
    """``max_length`` (the declared fast path ``bounded_speculation``) changes the work, not the
    draw nor the density: every bound from ``m`` to ``N``, blocks at the start, the middle and
    the end of the grid, agree with the unbounded speculation to float32 rounding (the
    cumulative sums add in another order); a window that is not clamped at the end does not."""
    process = DiffusionProcess(
        CLOUD, 2, CLOUD_TIMES, speculation_variance=variance, posterior_rank=rank
    )
    assert process.bounded_speculation
    assert bounded_speculation_errors(process) < 1e-5
    wrong = UnclampedWindow(
        CLOUD, 2, CLOUD_TIMES, speculation_variance=variance, posterior_rank=rank
    )
    assert bounded_speculation_errors(wrong) > 1e-2
    with pytest.raises(InputError, match=r"site 'y': max_length must be in \[1, 8\], got 9"):
        process.spec_sample(
            jax.random.PRNGKey(0),
            random_path(1),
            0,
            2,
            process.query(random_path(1), 0),
            max_length=9,
        )


def test_linear_response_speculation_is_the_target_for_a_gaussian():
    """For Y ~ N(mu, s^2 I) the drift is linear, f(t_k, y_k) - O_a = c_k z_k: the
    linear-response speculation with variance s^2 has the target's density on a whole block
    (acceptance 1), while the frozen drift's is far from it on the same block."""
    gaussian = GaussianMixtureDenoiser.isotropic(jnp.ones(1), jnp.array([[0.3, -0.2]]), 0.5)
    times = default_times(64, 100.0)
    linear = DiffusionProcess(gaussian, 2, times, speculation_variance=0.25)
    frozen = DiffusionProcess(gaussian, 2, times)
    x = linear.init(jax.random.PRNGKey(0))
    for k in range(10):
        x = linear.target_sample(jax.random.PRNGKey(k), x, k, linear.query(x, k))
    a, m = 10, 50
    answer = linear.query(x, a)
    speculated = linear.spec_sample(jax.random.PRNGKey(23), x, a, m, answer)
    log_mu = sum(
        linear.target_logp(speculated, k, linear.query(speculated, k)) for k in range(a, a + m)
    )
    assert abs(float(log_mu - linear.spec_logp(speculated, a, m, answer))) < 1e-2
    assert abs(float(log_mu - frozen.spec_logp(speculated, a, m, answer))) > 1.0


def test_posterior_response_reads_the_clouds_posterior_covariance():
    """With ``"posterior"`` a query returns ``(f, lambda, U)``, the eigendecomposition of
    ``Cov(Y | y_t) = grad_y f``: for a point cloud the weighted covariance of its points
    (float64 NumPy); ``reduce``, the batched forms and ``output`` read the drift alone."""
    process = DiffusionProcess(CLOUD, 2, CLOUD_TIMES, speculation_variance="posterior")
    x = random_path(31)
    points = np.asarray(CLOUD.points, np.float64)
    for k in (1, 3, 6):
        answer = np.asarray(process.query(x, k), np.float64)
        assert answer.shape == (2 + 2 + 4,)
        t, y = float(CLOUD_TIMES[k]), np.asarray(x.path[k], np.float64)
        logits = points @ y - 0.5 * t * np.sum(points**2, axis=1)  # N(y; t p, t I)
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        mean = weights @ points
        covariance = (points - mean).T @ np.diag(weights) @ (points - mean)
        np.testing.assert_allclose(answer[:2], mean, rtol=1e-4, atol=1e-5)
        variances, basis = answer[2:4], answer[4:].reshape(2, 2)
        np.testing.assert_allclose(basis @ np.diag(variances) @ basis.T, covariance, atol=1e-4)
        np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-5)
        np.testing.assert_array_equal(process.reduce(x, k, answer), answer[:2])
    states = DiffusionState(path=jnp.stack([x.path, random_path(32).path]))
    slot, k = jnp.array([1, 0]), jnp.array([2, 5])
    batch = process.query_batch(states, slot, k)
    np.testing.assert_allclose(batch[0], process.query(random_path(32), 2), rtol=1e-5, atol=1e-6)
    drifts, _ = process.score_batch(states, slot, k, batch)
    np.testing.assert_array_equal(drifts, batch[:, :2])
    np.testing.assert_array_equal(process.output(x, batch[1]), batch[1, :2])


def test_posterior_response_is_the_target_for_any_gaussian():
    """For ``Y ~ N(mu, S)`` the drift is linear, ``f(t_k, y_k) - O_a = C_k z_k`` with
    ``C_k = S_a (I + (t_k - t_a) S_a)^{-1}``: the posterior covariance's response has the
    target's density on a whole block (acceptance 1) for an anisotropic ``S``, where the
    frozen drift and the linear response of one variance do not; for ``S = s^2 I`` it has
    the density of the given variance's response."""
    covariance = jnp.array([[1.0, 0.45], [0.45, 0.25]])  # eigenvalues about 1.2 and 0.04
    gaussian = GaussianMixtureDenoiser(jnp.ones(1), jnp.array([[0.3, -0.2]]), covariance[None])
    times = default_times(64, 100.0)
    posterior = DiffusionProcess(gaussian, 2, times, speculation_variance="posterior")
    isotropic = DiffusionProcess(gaussian, 2, times, speculation_variance=0.6)
    frozen = DiffusionProcess(gaussian, 2, times)
    x = posterior.init(jax.random.PRNGKey(0))
    for k in range(2):
        x = posterior.target_sample(jax.random.PRNGKey(k), x, k, posterior.query(x, k)[:2])
    a, m = 2, 60
    answer = posterior.query(x, a)
    speculated = posterior.spec_sample(jax.random.PRNGKey(23), x, a, m, answer)
    log_mu = sum(
        posterior.target_logp(
            speculated, k, posterior.reduce(speculated, k, posterior.query(speculated, k))
        )
        for k in range(a, a + m)
    )
    assert abs(float(log_mu - posterior.spec_logp(speculated, a, m, answer))) < 1e-2
    for other in (frozen, isotropic):  # ten times the exact one's tolerance, and more
        assert abs(float(log_mu - other.spec_logp(speculated, a, m, answer[:2]))) > 0.1

    spherical = GaussianMixtureDenoiser.isotropic(jnp.ones(1), jnp.array([[0.3, -0.2]]), 0.5)
    given = DiffusionProcess(spherical, 2, times, speculation_variance=0.25)
    read = DiffusionProcess(spherical, 2, times, speculation_variance="posterior")
    path = given.spec_sample(jax.random.PRNGKey(33), x, a, m, given.query(x, a))
    np.testing.assert_allclose(
        read.spec_logp(path, a, m, read.query(x, a)),
        given.spec_logp(path, a, m, given.query(x, a)),
        rtol=1e-5,
    )


def test_low_rank_posterior_is_the_target_for_a_gaussian_of_that_rank():
    """``posterior_rank=r``: for ``Y ~ N(mu, S)`` with ``S`` of rank ``r`` the range finder's
    frame spans the Jacobian's range, so the estimate is the posterior covariance itself (the
    Jacobian, by ``jax.jacfwd``), its basis ``d x r`` orthonormal, and the speculation has the
    target's density on a whole block, as the whole Jacobian's does, with nothing left for the
    isotropic rest; with rank ``r - 1`` it does not (the rest's variance stands for the missing
    direction).  A rank of at least ``d`` reads the whole Jacobian."""
    frame, _ = np.linalg.qr(np.random.default_rng(4).normal(size=(4, 2)))
    covariance = jnp.asarray(frame @ np.diag([1.0, 0.6]) @ frame.T, jnp.float32)  # rank 2, d = 4
    gaussian = GaussianMixtureDenoiser(
        jnp.ones(1), jnp.array([[0.3, -0.2, 0.1, 0.0]]), covariance[None]
    )
    times = default_times(64, 100.0)
    low = DiffusionProcess(gaussian, 4, times, speculation_variance="posterior", posterior_rank=2)
    lower = DiffusionProcess(gaussian, 4, times, speculation_variance="posterior", posterior_rank=1)
    frozen = DiffusionProcess(gaussian, 4, times)
    assert (
        DiffusionProcess(
            gaussian, 4, times, speculation_variance="posterior", posterior_rank=4
        ).posterior_rank
        is None
    )
    x = low.init(jax.random.PRNGKey(0))
    for k in range(2):
        x = low.target_sample(jax.random.PRNGKey(k), x, k, low.query(x, k)[:4])
    a, m = 2, 60
    answer = low.query(x, a)
    assert answer.shape == (4 + 2 + 1 + 4 * 2,)
    variances, rest = np.asarray(answer[4:6]), float(answer[6])
    basis = np.asarray(answer[7:]).reshape(4, 2)
    assert abs(rest) < 1e-5  # nothing left off the basis
    jacobian = np.asarray(jax.jacfwd(lambda y: gaussian(times[a], y))(x.path[a]))
    np.testing.assert_allclose(basis @ np.diag(variances) @ basis.T, jacobian, atol=1e-4)
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-5)
    speculated = low.spec_sample(jax.random.PRNGKey(23), x, a, m, answer)
    log_mu = sum(
        low.target_logp(speculated, k, low.reduce(speculated, k, low.query(speculated, k)))
        for k in range(a, a + m)
    )
    assert abs(float(log_mu - low.spec_logp(speculated, a, m, answer))) < 1e-3
    # rank 1: the second direction is read as part of an isotropic rest, so the speculation is
    # not the target (3.5 here, 0.6-3.5 for other keys); the frozen drift is further (67 here)
    rank_one = abs(float(log_mu - lower.spec_logp(speculated, a, m, lower.query(x, a))))
    assert 1e-2 < rank_one < abs(float(log_mu - frozen.spec_logp(speculated, a, m, answer[:4])))


def speculated_block_errors(sampler, density, draws=4000):
    """How far ``sampler.spec_sample``'s draws of a block are from the Gaussian
    ``exp(density.spec_logp)`` (precision ``-hessian(spec_logp)``, mean where its gradient
    vanishes): the largest error of the mean in standard errors, and of the covariance relative
    to its scale, over the 6 coordinates of a block of 3 steps of the point cloud in a
    direction where the posterior covariance has not collapsed."""
    x = random_path(41)
    x = x._replace(path=x.path * 0.2)
    a, m = 1, 3
    keys = jax.random.split(jax.random.PRNGKey(7), draws)
    answer = sampler.query(x, a)
    paths = jax.jit(jax.vmap(lambda key: sampler.spec_sample(key, x, a, m, answer).path))(keys)
    block = np.asarray(paths[:, a + 1 : a + m + 1].reshape(draws, -1), np.float64)
    answer = density.query(x, a)

    def log_density(values):
        path = x.path.at[a + 1 : a + m + 1].set(values.reshape(m, 2))
        return density.spec_logp(DiffusionState(path=path), a, m, answer)

    start = jnp.asarray(x.path[a + 1 : a + m + 1].reshape(-1))
    covariance = np.linalg.inv(-np.asarray(jax.hessian(log_density)(start), np.float64))
    mean = np.asarray(start, np.float64) + covariance @ np.asarray(
        jax.grad(log_density)(start), np.float64
    )
    mean_error = np.max(np.abs(block.mean(axis=0) - mean) / np.sqrt(np.diag(covariance) / draws))
    scale = np.sqrt(np.outer(np.diag(covariance), np.diag(covariance)))
    return mean_error, np.max(np.abs(np.cov(block.T) - covariance) / scale)


@pytest.mark.parametrize("rank", [None, 1], ids=["whole-jacobian", "rank-1"])
def test_posterior_speculation_draws_from_its_stated_density(rank):
    """``spec_sample`` draws from ``exp(spec_logp)``, the density the acceptance tests use
    (docs/algorithm.md section 3): 4000 speculated blocks (:func:`speculated_block_errors`),
    the mean within 4.5 standard errors in every coordinate and the covariance within 0.1 of
    its scale (the largest errors are about 0.5 and 0.05 here).  With ``rank=1`` the noise
    off the estimate's basis walks with the rest's response."""
    process = DiffusionProcess(
        CLOUD, 2, CLOUD_TIMES, speculation_variance="posterior", posterior_rank=rank
    )
    mean_error, covariance_error = speculated_block_errors(process, process)
    assert mean_error < 4.5
    assert covariance_error < 0.1


def test_stated_density_check_catches_a_sampler_that_leaves_noise_out(monkeypatch):
    """The same check fails for a sampler whose draws do not follow the density: the rank-1
    speculation's density, with draws whose noise off the estimate's basis is left out (the
    mistake the rest's walk avoids; the walk along the basis has one column, the rest's
    two)."""
    response_walk = linear_response.response_walk

    def rest_left_out(log_growths, scaled_noise, in_block):
        walk = response_walk(log_growths, scaled_noise, in_block)
        return walk if scaled_noise.shape[1] == 1 else 0.0 * walk

    options = dict(speculation_variance="posterior", posterior_rank=1)
    wrong = DiffusionProcess(CLOUD, 2, CLOUD_TIMES, **options)
    right = DiffusionProcess(CLOUD, 2, CLOUD_TIMES, **options)
    monkeypatch.setattr(linear_response, "response_walk", rest_left_out)
    _, covariance_error = speculated_block_errors(wrong, right)
    assert covariance_error > 0.3


#: the broken one-step sampler's step variance, as a multiple of the right one
ONE_STEP_VARIANCE_ERROR = 1.2


def one_step_draws(process, sampling_process, num_draws=10_000):
    """Draws of step ``k = 5`` of a random path, by a speculation of one step and by a target
    step of ``sampling_process``, standardized by the exact law ``N(y_k + h f, h I)`` of
    ``process``."""
    x, k = random_path(7), 5
    drift = process.query(x, k)
    keys = jax.random.split(jax.random.PRNGKey(8), num_draws)
    by_spec = jax.vmap(lambda key: sampling_process.spec_sample(key, x, k, 1, drift).path[k + 1])(
        keys
    )
    by_target = jax.vmap(lambda key: sampling_process.target_sample(key, x, k, drift).path[k + 1])(
        keys
    )
    h = float(process.step_sizes[k])
    mean = np.asarray(x.path[k] + h * drift)
    return [(np.asarray(draws) - mean) / np.sqrt(h) for draws in (by_spec, by_target)]


def one_step_p_value(standardized) -> float:
    """Both coordinates N(0, 1): one-sample KS against the exact law, Bonferroni over the two."""
    return min(1.0, 2 * min(stats.kstest(standardized[:, j], "norm").pvalue for j in range(2)))


def test_speculation_of_one_step_is_a_target_step():
    """nu_[k, k+1) = mu(step k | prefix): equal densities everywhere, and the same law (10 000
    draws of each; a step variance 1.2x the right one is rejected, see the next test)."""
    process = CLOUD_PROCESS
    for seed, k in [(4, 0), (5, 3), (6, NUM_STEPS - 1)]:
        x = random_path(seed)
        drift = process.query(x, k)
        np.testing.assert_allclose(
            process.spec_logp(x, k, 1, drift), process.target_logp(x, k, drift), rtol=1e-6
        )
    by_spec, by_target = one_step_draws(process, process)
    for standardized in (by_spec, by_target):
        assert one_step_p_value(standardized) > THRESHOLD
    assert_projections_agree(by_spec, by_target, np.eye(2), threshold=THRESHOLD)


def test_one_step_law_check_rejects_a_step_with_the_wrong_variance():
    """The same check on both samplers of a process whose steps carry
    ``ONE_STEP_VARIANCE_ERROR`` times the variance (measured: p 5.8e-8 and 2.4e-7, against
    the right law's 1.0 and 0.49; a variance 1.1x gives only about 2e-3)."""
    broken = copy.copy(CLOUD_PROCESS)
    broken._sqrt_step_sizes = CLOUD_PROCESS._sqrt_step_sizes * np.sqrt(ONE_STEP_VARIANCE_ERROR)
    for standardized in one_step_draws(CLOUD_PROCESS, broken):
        assert one_step_p_value(standardized) < THRESHOLD


def test_methods_under_jit_and_vmap_with_traced_indices():
    process, x = MIXTURE_PROCESS, random_path(9)
    key = jax.random.PRNGKey(10)
    starts = jnp.array([0, 1, 3, 7, 2], jnp.int32)
    lengths = jnp.array([8, 3, 5, 1, 1], jnp.int32)

    @jax.jit
    @jax.vmap
    def batched(a, m):
        answer = process.query(x, a)
        spec = process.spec_sample(key, x, a, m, answer)
        reduced = process.reduce(x, a, answer)
        stepped = process.target_sample(key, x, a, reduced)
        return (
            spec.path,
            process.spec_logp(spec, a, m, answer),
            stepped.path,
            process.target_logp(stepped, a, reduced),
        )

    results = batched(starts, lengths)
    for i, (a, m) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        answer = process.query(x, a)
        spec = process.spec_sample(key, x, a, m, answer)
        stepped = process.target_sample(key, x, a, answer)
        eager = (
            spec.path,
            process.spec_logp(spec, a, m, answer),
            stepped.path,
            process.target_logp(stepped, a, answer),
        )
        for got, want in zip(results, eager, strict=True):
            np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5)
    # the whole path is a pytree that the samplers can batch
    assert jax.tree.structure(x) == jax.tree.structure(DiffusionState(path=x.path))


def test_output_is_the_final_answer_and_final_state_is_y_n():
    process, x = CLOUD_PROCESS, random_path(11)
    answer = process.query(x, NUM_STEPS)
    np.testing.assert_allclose(answer, CLOUD(CLOUD_TIMES[-1], x.path[-1]))
    assert process.output(x, answer) is answer
    np.testing.assert_array_equal(process.final_state(x), x.path[NUM_STEPS])
    with pytest.raises(ValueError, match="final_answer"):
        process.output(x, None)


# ------------------------------------------------------------------------------ exactness
def test_reference_sequential_sampler_is_the_euler_chain():
    keys = jax.random.split(jax.random.PRNGKey(12), 6)
    values, rounds, queries = reference.sample_many(
        CLOUD_PROCESS, jax.random.PRNGKey(12), 6, SamplerConfig(method="sequential")
    )
    np.testing.assert_allclose(values, euler_chain(CLOUD_PROCESS, keys), rtol=1e-5, atol=1e-6)
    # and the package's compiled chain, which supplies the shared 200 000 draws
    # (tests/diffusion_chains.py)
    np.testing.assert_allclose(values, chain_draws(CLOUD_PROCESS, 12, 6), rtol=1e-5, atol=1e-6)
    assert (rounds == NUM_STEPS + 1).all() and (queries == NUM_STEPS + 1).all()


@pytest.fixture(scope="module")
def cloud_euler_categories():
    return cloud_chain_categories()  # shared with tests/engine/test_diffusion.py


@pytest.mark.slow
def test_autospeculation_matches_euler_chain_on_point_cloud(cloud_euler_categories):
    num_draws = 1200
    # the power of the two-sample test: its effective number of draws, not the reference's
    effective = num_draws * cloud_euler_categories.size / (num_draws + cloud_euler_categories.size)
    assert power_draws(0.081, 0.2, num_cells=5) <= effective
    values, rounds, _ = reference.sample_many(CLOUD_PROCESS, jax.random.PRNGKey(14), num_draws)
    # the grid is coarse: the chain's law is visibly not uniform over the 5 points
    euler_law = np.bincount(cloud_euler_categories, minlength=5) / cloud_euler_categories.size
    assert euler_law[4] > 0.25
    assert_two_sample(
        nearest_point(values), cloud_euler_categories, threshold=THRESHOLD, label="point cloud"
    )
    assert rounds.mean() < NUM_STEPS + 1


@pytest.mark.slow
def test_autospeculation_matches_euler_chain_on_gaussian_mixture():
    values, _, _ = reference.sample_many(MIXTURE_PROCESS, jax.random.PRNGKey(15), 500)
    assert_mixture_law(values, "reference")


class TargetWithoutStepNormalizer(DiffusionProcess):
    """Wrong on purpose: the target density drops the h-dependence of its normalizing
    constant, -(d/2) log(2 pi h) -> -(d/2) log(2 pi), as if it cancelled against the
    speculation's (it does not: only the speculation keeps it)."""

    def target_logp(self, x, k, reduced):
        correct = super().target_logp(x, k, reduced)
        return correct + 0.5 * self.dim * jnp.log(self.step_sizes[k])


@pytest.mark.slow
def test_harness_rejects_a_wrong_density(cloud_euler_categories):
    """Here sum log h over the grid is +9: speculations are over-accepted and the output
    drifts toward the walk frozen at f(0, 0) = E[Y], i.e. toward the central point."""
    process = TargetWithoutStepNormalizer(CLOUD, 2, CLOUD_TIMES)
    values, _, _ = reference.sample_many(process, jax.random.PRNGKey(14), 200)
    assert_cloud_law_rejected(values, cloud_euler_categories)


@pytest.mark.slow
def test_mixture_test_rejects_a_wrong_density():
    """The KS tests of the mixture on 500 draws of the reference with the same keys and the
    target density without its normalizer's h-dependence fail (measured: p = 1.6e-6, 3.4e-6,
    3.1e-12 and 4.3e-4 on the four projections)."""
    process = TargetWithoutStepNormalizer(MIXTURE, 2, MIXTURE_TIMES)
    values, _, _ = reference.sample_many(process, jax.random.PRNGKey(15), 500)
    with pytest.raises(AssertionError, match="projected Kolmogorov-Smirnov failed"):
        assert_mixture_law(values, "broken reference")


def test_default_residual_growth_on_diffusion_is_three():
    """The diffusion default (``SamplerConfig.growth = None``) runs residual batches of 1, 4,
    16, ... trials (``DIFFUSION_GROWTH``): the same draws and rounds
    as ``growth=3`` explicitly; the same draws as ``growth=1`` and different rounds."""
    assert SamplerConfig().root_policy(NUM_STEPS, discrete=False).growth == DIFFUSION_GROWTH == 3
    assert SamplerConfig().root_policy(NUM_STEPS, discrete=True).growth == 1
    key = jax.random.PRNGKey(18)
    default = reference.sample_many(CLOUD_PROCESS, key, 24)
    three = reference.sample_many(CLOUD_PROCESS, key, 24, SamplerConfig(growth=3.0))
    one = reference.sample_many(CLOUD_PROCESS, key, 24, SamplerConfig(growth=1.0))
    for left, right in zip(default, three, strict=True):
        np.testing.assert_array_equal(left, right)
    np.testing.assert_array_equal(default[0], one[0])
    assert (default[1] != one[1]).any()


def test_draws_do_not_depend_on_growth_rate():
    key = jax.random.PRNGKey(17)
    slow = reference.sample_many(CLOUD_PROCESS, key, 24, SamplerConfig(growth=0.25))
    fast = reference.sample_many(CLOUD_PROCESS, key, 24, SamplerConfig(growth=3.0))
    np.testing.assert_array_equal(slow[0], fast[0])
    # not vacuous: residual batches of different sizes ran, so the rounds differ
    assert (slow[1] != fast[1]).any()


@pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed"
)
def test_default_grid_lands_on_digits_and_keeps_their_law():
    """The claims of ``default_times`` (sequential chain, N = 64, t_max = 1000, 500 draws):
    every output is a digit image up to float32 rounding, and the number of distinct images
    hit is what uniform draws give, while the uniform grid collapses onto far fewer."""
    denoiser = digits_point_cloud()
    num_points, num_draws = denoiser.num_points, 500
    keys = jax.random.split(jax.random.PRNGKey(18), num_draws)
    # occupancy of uniform draws: mean M (1 - (1 - 1/M)^n), standard deviation ~ 6.6 here
    load = num_draws / num_points
    expected = num_points * (1 - (1 - 1 / num_points) ** num_draws)
    spread = np.sqrt(num_points * np.exp(-load) * (1 - (1 + load) * np.exp(-load)))
    distinct = {}
    for grid_name, times in (
        ("default", default_times(64)),
        ("uniform", uniform_times(64, DEFAULT_T_MAX)),
    ):
        outputs = euler_chain(DiffusionProcess(denoiser, 64, times), keys)
        nearest = np.asarray(jax.vmap(denoiser.nearest)(jnp.asarray(outputs)))
        distance = np.linalg.norm(outputs - np.asarray(denoiser.points)[nearest], axis=-1)
        assert distance.max() < 1e-5, grid_name
        distinct[grid_name] = np.unique(nearest).size
    assert abs(distinct["default"] - expected) < 5 * spread, (distinct, expected)
    assert distinct["uniform"] < expected - 20 * spread, (distinct, expected)
