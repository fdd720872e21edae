"""PointCloudDenoiser against brute-force Bayes in float64 numpy and the martingale property."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from numpyro_autospec.denoisers import PointCloudDenoiser
from tests.denoisers.harness import (
    assert_means_within,
    denoise_batch,
    eager_calls,
    observations_and_residuals,
    targets_and_noise,
)
from tests.gof import assert_gof

NUM_POINTS = 7
DIM = 3


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(NUM_POINTS, DIM))


@pytest.fixture(scope="module")
def denoiser(points: np.ndarray) -> PointCloudDenoiser:
    return PointCloudDenoiser(points)


@pytest.fixture(scope="module")
def draws(denoiser: PointCloudDenoiser) -> tuple[jax.Array, jax.Array]:
    """Exact draws of Y and independent standard normal noise, shared by the tests."""
    return targets_and_noise(denoiser, 4)


def brute_force_posterior(
    points: np.ndarray, t: float, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior weights and mean from the full Gaussian likelihood N(y; t p_j, t I), float64."""
    log_likelihoods = stats.multivariate_normal.logpdf(
        y[None, :] - t * points, mean=np.zeros(points.shape[1]), cov=t
    )
    weights = np.exp(log_likelihoods - special.logsumexp(log_likelihoods))
    return weights, weights @ points


@pytest.mark.parametrize("t", [1e-3, 0.1, 1.0, 10.0, 100.0])
def test_matches_brute_force_bayes(
    denoiser: PointCloudDenoiser, points: np.ndarray, t: float
) -> None:
    rng = np.random.default_rng(1)
    for index in range(NUM_POINTS):
        y = t * points[index] + np.sqrt(t) * rng.normal(size=DIM)
        expected_weights, expected_mean = brute_force_posterior(points, t, y)
        np.testing.assert_allclose(
            denoiser.posterior_weights(t, y), expected_weights, rtol=1e-4, atol=1e-6
        )
        np.testing.assert_allclose(denoiser(t, y), expected_mean, rtol=1e-4, atol=1e-5)


def test_time_zero_gives_the_mean(denoiser: PointCloudDenoiser, points: np.ndarray) -> None:
    np.testing.assert_allclose(denoiser(0.0, jnp.zeros(DIM)), points.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(denoiser.mean, points.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(
        denoiser.posterior_weights(0.0, jnp.zeros(DIM)), np.full(NUM_POINTS, 1 / NUM_POINTS)
    )


def test_time_zero_is_the_limit_from_positive_times(denoiser: PointCloudDenoiser) -> None:
    y = jnp.array([0.3, -0.2, 0.5])
    np.testing.assert_allclose(denoiser(0.0, y), denoiser(1e-6, y), atol=1e-5)


def test_large_time_recovers_the_observed_point(
    denoiser: PointCloudDenoiser, points: np.ndarray
) -> None:
    t = 1e4
    noise = np.random.default_rng(2).normal(size=(NUM_POINTS, DIM))
    observations = t * points + np.sqrt(t) * noise
    outputs = jax.vmap(denoiser, in_axes=(None, 0))(t, observations)
    np.testing.assert_allclose(outputs, points, atol=1e-4)
    assert np.all(np.isfinite(outputs))


@pytest.mark.parametrize("t", [0.3, 3.0])
def test_martingale_property(
    denoiser: PointCloudDenoiser,
    points: np.ndarray,
    draws: tuple[jax.Array, jax.Array],
    t: float,
) -> None:
    """E_y[f(t, y)] = E[Y] and E_y[w(t, y)] = uniform, for y = tY + sqrt(t) g."""
    targets, noise = draws
    observations = t * targets + np.sqrt(t) * noise
    assert_means_within(denoise_batch(denoiser, t, observations), points.mean(axis=0))
    weights = jax.vmap(denoiser.posterior_weights, in_axes=(None, 0))(t, observations)
    assert_means_within(weights, 1 / NUM_POINTS)


def test_orthogonality_defines_the_conditional_mean(
    denoiser: PointCloudDenoiser, draws: tuple[jax.Array, jax.Array]
) -> None:
    """E[(Y - f(t, y)) y_i] = 0 for every i: the residual is orthogonal to functions of y."""
    observations, residuals = observations_and_residuals(denoiser, draws, 1.0)
    assert_means_within(residuals[:, :, None] * observations[:, None, :], 0.0)


def test_jit_and_vmap_agree_with_eager_calls(denoiser: PointCloudDenoiser) -> None:
    times, observations, eager = eager_calls(denoiser, 6)
    np.testing.assert_allclose(jax.jit(denoiser)(times[0], observations[0]), eager[0], rtol=1e-5)
    np.testing.assert_allclose(jax.vmap(denoiser)(times, observations), eager, rtol=1e-5)
    batched = jax.jit(jax.vmap(denoiser))(times, observations)
    np.testing.assert_allclose(batched, eager, rtol=1e-5, atol=1e-6)
    assert batched.dtype == jnp.float32


def test_is_a_pytree_argument_of_jit(denoiser: PointCloudDenoiser) -> None:
    leaves, treedef = jax.tree_util.tree_flatten(denoiser)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    y = jnp.array([1.0, 0.0, -1.0])
    np.testing.assert_allclose(rebuilt(0.5, y), denoiser(0.5, y))
    through_jit = jax.jit(lambda model, t, state: model(t, state))(denoiser, 0.5, y)
    np.testing.assert_allclose(through_jit, denoiser(0.5, y), rtol=1e-6)


def test_nearest_matches_numpy(denoiser: PointCloudDenoiser, points: np.ndarray) -> None:
    queries = np.random.default_rng(7).normal(scale=2.0, size=(200, DIM))
    distances = np.linalg.norm(queries[:, None, :] - points[None, :, :], axis=-1)
    indices = jax.vmap(denoiser.nearest)(queries)
    assert indices.dtype == jnp.int32
    np.testing.assert_array_equal(indices, distances.argmin(axis=1))
    np.testing.assert_array_equal(jax.vmap(denoiser.nearest)(points), np.arange(NUM_POINTS))


def check_uniform_over_the_points(denoiser: PointCloudDenoiser, points: np.ndarray) -> None:
    """Chi-square over the points, p > 1e-4; 16 000 draws catch an absolute error of 0.02 in
    a point's probability 1/7 at power 0.99 (``catches``)."""
    num_samples = 16_000
    samples = denoiser.sample(jax.random.key(8), num_samples)
    assert samples.shape == (num_samples, DIM)
    indices = np.asarray(jax.vmap(denoiser.nearest)(samples))
    np.testing.assert_array_equal(samples, points.astype(np.float32)[indices])
    uniform = np.full(NUM_POINTS, 1.0 / NUM_POINTS)
    assert_gof(indices, uniform, label="point cloud", catches=(0.02, 1.0 / NUM_POINTS))


def test_sample_is_uniform_over_the_points(
    denoiser: PointCloudDenoiser, points: np.ndarray
) -> None:
    check_uniform_over_the_points(denoiser, points)


def test_the_same_check_rejects_an_off_by_one_index_draw(
    monkeypatch: pytest.MonkeyPatch, denoiser: PointCloudDenoiser, points: np.ndarray
) -> None:
    """A ``sample`` whose index draw stops one point short (``randint(..., num_points - 1)``)
    fails the same check."""
    randint = jax.random.randint
    monkeypatch.setattr(
        jax.random, "randint", lambda key, shape, low, high: randint(key, shape, low, high - 1)
    )
    jax.clear_caches()  # the jitted sample traced afresh with the broken draw, and dropped after
    try:
        with pytest.raises(AssertionError, match="chi-square goodness of fit failed"):
            check_uniform_over_the_points(denoiser, points)
    finally:
        jax.clear_caches()


def test_labels_are_carried(points: np.ndarray) -> None:
    labelled = PointCloudDenoiser(points, labels=np.arange(NUM_POINTS) % 2)
    np.testing.assert_array_equal(labelled.labels, np.arange(NUM_POINTS) % 2)
    assert PointCloudDenoiser(points).labels is None
    rebuilt = jax.tree_util.tree_map(lambda leaf: leaf, labelled)
    np.testing.assert_array_equal(rebuilt.labels, labelled.labels)


def test_attributes(denoiser: PointCloudDenoiser) -> None:
    assert denoiser.dim == DIM
    assert denoiser.num_points == NUM_POINTS
    assert denoiser.points.dtype == jnp.float32
    assert repr(denoiser) == "PointCloudDenoiser(num_points=7, dim=3)"


@pytest.mark.parametrize(
    ("points", "pattern"),
    [
        (np.zeros(3), r"shape \(num_points, dim\)"),
        (np.zeros((0, 3)), r"shape \(num_points, dim\)"),
        (np.zeros((2, 3, 1)), r"shape \(num_points, dim\)"),
        (np.array([[0.0, np.nan]]), "finite"),
    ],
)
def test_constructor_rejects_bad_points(points: np.ndarray, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        PointCloudDenoiser(points)


def test_constructor_rejects_mismatched_labels(points: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"labels must have shape \(7,\)"):
        PointCloudDenoiser(points, labels=np.zeros(3))


def test_call_rejects_batched_inputs(denoiser: PointCloudDenoiser) -> None:
    with pytest.raises(ValueError, match=r"y must have shape \(3,\).*jax.vmap"):
        denoiser(1.0, jnp.zeros((2, DIM)))
    with pytest.raises(ValueError, match=r"t must be a scalar.*jax.vmap"):
        denoiser(jnp.ones(2), jnp.zeros(DIM))
