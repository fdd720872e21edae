"""The scikit-learn digits as an exact point-cloud denoiser in dimension 64."""

import importlib.util
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from numpyro_autospec.denoisers import PointCloudDenoiser, digits_point_cloud, validate_denoiser
from numpyro_autospec.denoisers import _digits as digits_module
from numpyro_autospec.denoisers._digits import DIGITS_MAX_PIXEL_VALUE
from tests.denoisers.harness import Z_TOLERANCE

NUM_IMAGES = 1797
DIM = 64

# scikit-learn ships the data set; it is an optional dependency (the `examples` extra).
requires_scikit_learn = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed"
)


@pytest.fixture(scope="module")
def denoiser() -> PointCloudDenoiser:
    return digits_point_cloud()


@requires_scikit_learn
def test_points_and_labels(denoiser: PointCloudDenoiser) -> None:
    from sklearn.datasets import load_digits

    dataset = load_digits()
    assert denoiser.dim == DIM
    assert denoiser.points.shape == (NUM_IMAGES, DIM)
    np.testing.assert_allclose(denoiser.points, dataset.data / 16.0, rtol=1e-7)
    assert float(denoiser.points.min()) == 0.0
    assert float(denoiser.points.max()) == 1.0
    assert denoiser.labels is not None
    assert denoiser.labels.shape == (NUM_IMAGES,)
    np.testing.assert_array_equal(denoiser.labels, dataset.target)
    np.testing.assert_array_equal(np.unique(np.asarray(denoiser.labels)), np.arange(10))


@requires_scikit_learn
def test_unscaled_pixels(denoiser: PointCloudDenoiser) -> None:
    unscaled = digits_point_cloud(scale=False)
    assert float(unscaled.points.max()) == DIGITS_MAX_PIXEL_VALUE
    np.testing.assert_allclose(unscaled.points, DIGITS_MAX_PIXEL_VALUE * denoiser.points)


@requires_scikit_learn
def test_meets_the_denoiser_contract(denoiser: PointCloudDenoiser) -> None:
    validate_denoiser(denoiser, DIM, times=np.linspace(0.0, 200.0, 2001))


@requires_scikit_learn
def test_time_zero_gives_the_mean_image(denoiser: PointCloudDenoiser) -> None:
    mean_image = np.asarray(denoiser.points, dtype=np.float64).mean(axis=0)
    np.testing.assert_allclose(denoiser(0.0, jnp.zeros(DIM)), mean_image, atol=1e-6)


@requires_scikit_learn
@pytest.mark.parametrize("t", [0.5, 5.0, 50.0])
def test_matches_brute_force_bayes(denoiser: PointCloudDenoiser, t: float) -> None:
    points = np.asarray(denoiser.points, dtype=np.float64)
    rng = np.random.default_rng(0)
    for index in rng.integers(0, NUM_IMAGES, size=5):
        y = (t * points[index] + np.sqrt(t) * rng.normal(size=DIM)).astype(np.float32)
        log_likelihoods = -np.sum((y.astype(np.float64) - t * points) ** 2, axis=1) / (2 * t)
        weights = np.exp(log_likelihoods - special.logsumexp(log_likelihoods))
        np.testing.assert_allclose(denoiser(t, y), weights @ points, atol=1e-5)


@requires_scikit_learn
def test_large_time_recovers_image_and_label(denoiser: PointCloudDenoiser) -> None:
    t = 1e4
    indices = np.random.default_rng(1).integers(0, NUM_IMAGES, size=64)
    points = denoiser.points[indices]
    noise = jax.random.normal(jax.random.key(2), points.shape)
    outputs = jax.vmap(denoiser, in_axes=(None, 0))(t, t * points + np.sqrt(t) * noise)
    np.testing.assert_allclose(outputs, points, atol=1e-5)
    recovered = jax.vmap(denoiser.nearest)(outputs)
    np.testing.assert_array_equal(recovered, indices)
    assert denoiser.labels is not None
    np.testing.assert_array_equal(denoiser.labels[recovered], denoiser.labels[indices])


@requires_scikit_learn
def test_martingale_property(denoiser: PointCloudDenoiser) -> None:
    """E_y[f(t, y)] = E[Y] at t = 2, where the posterior is spread over several images."""
    t, num_samples = 2.0, 4_000
    sample_key, noise_key = jax.random.split(jax.random.key(3))
    targets = denoiser.sample(sample_key, num_samples)
    observations = t * targets + np.sqrt(t) * jax.random.normal(noise_key, targets.shape)
    outputs = np.asarray(jax.jit(jax.vmap(denoiser, in_axes=(None, 0)))(t, observations))
    mean_image = np.asarray(denoiser.mean)
    # Corner pixels are always 0: their output is 0 too, so skip zero-variance coordinates.
    standard_errors = outputs.std(axis=0) / np.sqrt(num_samples)
    varying = standard_errors > 0
    assert np.all(np.abs(outputs.mean(axis=0) - mean_image)[~varying] < 1e-6)
    error = np.abs(outputs.mean(axis=0) - mean_image)[varying]
    assert np.all(error < Z_TOLERANCE * standard_errors[varying])


def test_missing_scikit_learn_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    digits_module._load_digits.cache_clear()
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    try:
        with pytest.raises(ImportError, match="digits_point_cloud needs scikit-learn"):
            digits_point_cloud()
    finally:
        digits_module._load_digits.cache_clear()
