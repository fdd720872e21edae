"""GaussianMixtureDenoiser against quadrature, a direct float64 formula, and the point cloud."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from numpyro_autospec.denoisers import GaussianMixtureDenoiser, PointCloudDenoiser
from tests.denoisers.harness import (
    NUM_DRAWS,
    Z_TOLERANCE,
    assert_means_within,
    denoise_batch,
    eager_calls,
    observations_and_residuals,
    targets_and_noise,
)

NUM_COMPONENTS = 3
DIM = 3


def random_mixture(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(NUM_COMPONENTS, 2.0))
    means = rng.normal(scale=2.0, size=(NUM_COMPONENTS, DIM))
    factors = rng.normal(scale=0.6, size=(NUM_COMPONENTS, DIM, DIM))
    covariances = factors @ np.swapaxes(factors, -1, -2) + 0.05 * np.eye(DIM)
    return weights, means, covariances


@pytest.fixture(scope="module")
def parameters() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return random_mixture(0)


@pytest.fixture(scope="module")
def denoiser(parameters: tuple[np.ndarray, np.ndarray, np.ndarray]) -> GaussianMixtureDenoiser:
    return GaussianMixtureDenoiser(*parameters)


@pytest.fixture(scope="module")
def draws(denoiser: GaussianMixtureDenoiser) -> tuple[jax.Array, jax.Array]:
    """Exact draws of Y from the mixture and independent standard normal noise, shared."""
    return targets_and_noise(denoiser, 1)


def direct_posterior(
    weights: np.ndarray, means: np.ndarray, covariances: np.ndarray, t: float, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 reference from the textbook formulas, with no algebraic rewriting.

    y | k ~ N(t m_k, t^2 S_k + t I) and E[Y | y, k] = m_k + t S_k (t^2 S_k + t I)^{-1} (y - t m_k).
    """
    dim = means.shape[1]
    log_terms, conditional_means = [], []
    for weight, mean, covariance in zip(weights, means, covariances, strict=True):
        observation_covariance = t**2 * covariance + t * np.eye(dim)
        log_terms.append(
            np.log(weight)
            + stats.multivariate_normal.logpdf(y, mean=t * mean, cov=observation_covariance)
        )
        gain = t * covariance @ np.linalg.inv(observation_covariance)
        conditional_means.append(mean + gain @ (y - t * mean))
    log_terms = np.asarray(log_terms)
    posterior = np.exp(log_terms - special.logsumexp(log_terms))
    return posterior, posterior @ np.asarray(conditional_means)


@pytest.mark.parametrize("t", [1e-3, 0.1, 1.0, 10.0, 1e3, 1e4])
def test_matches_direct_formula(
    denoiser: GaussianMixtureDenoiser,
    parameters: tuple[np.ndarray, np.ndarray, np.ndarray],
    draws: tuple[jax.Array, jax.Array],
    t: float,
) -> None:
    weights, means, covariances = parameters
    rng = np.random.default_rng(1)
    for target in np.asarray(draws[0][:6]):
        # The reference sees the same float32 observation: at t = 1e4 rounding y to float32
        # alone moves the component weights by about 1e-2.
        y = (t * target + np.sqrt(t) * rng.normal(size=DIM)).astype(np.float32)
        expected_weights, expected_mean = direct_posterior(
            weights, means, covariances, t, y.astype(np.float64)
        )
        np.testing.assert_allclose(
            denoiser.posterior_weights(t, y), expected_weights, rtol=1e-4, atol=1e-6
        )
        np.testing.assert_allclose(denoiser(t, y), expected_mean, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t", [0.05, 0.7, 5.0, 60.0])
def test_one_dimensional_mixture_matches_quadrature(t: float) -> None:
    """Posterior mean of a 1-D two-component mixture by numerical integration over Y."""
    weights = np.array([0.3, 0.7])
    means = np.array([-1.5, 1.0])
    scales = np.array([0.4, 0.8])
    denoiser = GaussianMixtureDenoiser(weights, means[:, None], (scales**2)[:, None, None])

    def prior_density(value: float) -> float:
        return float(np.sum(weights * stats.norm.pdf(value, loc=means, scale=scales)))

    for y in t * np.array([-1.5, -0.2, 0.4, 1.0]) + np.sqrt(t) * np.array([0.5, -1.0, 0.0, 1.3]):

        def likelihood(value: float, y: float = y) -> float:
            return stats.norm.pdf(y, loc=t * value, scale=np.sqrt(t))

        interval = (-10.0, 10.0)
        evidence = integrate.quad(lambda v: prior_density(v) * likelihood(v), *interval, limit=200)[
            0
        ]
        first_moment = integrate.quad(
            lambda v: v * prior_density(v) * likelihood(v), *interval, limit=200
        )[0]
        np.testing.assert_allclose(
            denoiser(t, jnp.array([y]))[0], first_moment / evidence, rtol=1e-4, atol=1e-5
        )


def test_single_gaussian_closed_form() -> None:
    """One component N(m, S): E[Y | y] = m + S (t S + I)^{-1} (y - t m) for every t."""
    mean = np.array([1.0, -2.0])
    covariance = np.array([[2.0, 0.6], [0.6, 0.5]])
    denoiser = GaussianMixtureDenoiser(np.ones(1), mean[None, :], covariance[None, :, :])
    y = np.array([0.7, 3.0])
    for t in [0.0, 0.5, 2.0, 1e4]:
        expected = mean + covariance @ np.linalg.solve(t * covariance + np.eye(2), y - t * mean)
        np.testing.assert_allclose(denoiser(t, y), expected, rtol=1e-5, atol=1e-5)


def test_time_zero_gives_the_mean(
    denoiser: GaussianMixtureDenoiser, parameters: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    weights, means, _ = parameters
    np.testing.assert_allclose(denoiser(0.0, jnp.zeros(DIM)), weights @ means, atol=1e-6)
    np.testing.assert_allclose(denoiser.mean, weights @ means, atol=1e-6)
    np.testing.assert_allclose(denoiser.posterior_weights(0.0, jnp.zeros(DIM)), weights, rtol=1e-6)


def test_large_time_recovers_the_target(
    denoiser: GaussianMixtureDenoiser, draws: tuple[jax.Array, jax.Array]
) -> None:
    """At t = 1e4 the posterior sd of each coordinate is below 1/sqrt(t) = 0.01."""
    t = 1e4
    targets, noise = draws
    outputs = denoise_batch(denoiser, t, t * targets + np.sqrt(t) * noise)
    assert np.all(np.isfinite(outputs))
    np.testing.assert_allclose(outputs, targets, atol=6 / np.sqrt(t))


@pytest.mark.parametrize("variance", [0.0, 1e-8])
def test_point_cloud_limit(variance: float) -> None:
    """Equal weights and (near) zero covariances: the mixture is the uniform point cloud."""
    points = np.random.default_rng(4).normal(size=(5, DIM))
    mixture = GaussianMixtureDenoiser.isotropic(np.ones(5), points, np.sqrt(variance))
    point_cloud = PointCloudDenoiser(points)
    rng = np.random.default_rng(5)
    for t in [0.0, 0.01, 1.0, 30.0, 1e4]:
        for index in range(5):
            y = t * points[index] + np.sqrt(t) * rng.normal(size=DIM)
            np.testing.assert_allclose(mixture(t, y), point_cloud(t, y), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(
                mixture.posterior_weights(t, y),
                point_cloud.posterior_weights(t, y),
                rtol=1e-3,
                atol=1e-6,
            )


def test_stable_over_the_whole_time_range() -> None:
    """Finite outputs up to t = 1e4, also with a singular covariance and an empty component."""
    means = np.array([[0.0, 0.0], [3.0, -1.0], [10.0, 10.0]])
    covariances = np.array([[[1.0, 0.99], [0.99, 1.0]], [[0.0, 0.0], [0.0, 2.0]], np.eye(2)])
    denoiser = GaussianMixtureDenoiser(np.array([0.5, 0.5, 0.0]), means, covariances)
    times = jnp.asarray(np.geomspace(1e-6, 1e4, 41), dtype=jnp.float32)
    targets = denoiser.sample(jax.random.key(6), times.shape[0])
    noise = jax.random.normal(jax.random.key(7), targets.shape)
    observations = times[:, None] * targets + jnp.sqrt(times)[:, None] * noise
    outputs = jax.vmap(denoiser)(times, observations)
    assert np.all(np.isfinite(outputs))
    component_weights = np.asarray(jax.vmap(denoiser.posterior_weights)(times, observations))
    assert np.all(np.isfinite(component_weights))
    assert np.all(component_weights[:, 2] == 0.0)  # the component with weight 0


@pytest.mark.parametrize("t", [0.5, 5.0])
def test_martingale_property(
    denoiser: GaussianMixtureDenoiser, draws: tuple[jax.Array, jax.Array], t: float
) -> None:
    """E_y[f(t, y)] = E[Y] for y = tY + sqrt(t) g."""
    targets, noise = draws
    outputs = denoise_batch(denoiser, t, t * targets + np.sqrt(t) * noise)
    assert_means_within(outputs, np.asarray(denoiser.mean))


def test_orthogonality_defines_the_conditional_mean(
    denoiser: GaussianMixtureDenoiser, draws: tuple[jax.Array, jax.Array]
) -> None:
    """Monte Carlo: E[(Y - f(t, y)) h(y)] = 0 for h(y) = 1 and h(y) = y_i."""
    observations, residuals = observations_and_residuals(denoiser, draws, 1.0)
    test_functions = np.concatenate([np.ones((NUM_DRAWS, 1)), observations], axis=1)
    assert_means_within(residuals[:, :, None] * test_functions[:, None, :], 0.0)


def test_sample_moments(
    parameters: tuple[np.ndarray, np.ndarray, np.ndarray], draws: tuple[jax.Array, jax.Array]
) -> None:
    weights, means, covariances = parameters
    samples = np.asarray(draws[0], dtype=np.float64)
    num_samples = samples.shape[0]
    assert samples.shape == (NUM_DRAWS, DIM)
    exact_mean = weights @ means
    exact_covariance = np.einsum(
        "k,kij->ij", weights, covariances + np.einsum("ki,kj->kij", means, means)
    ) - np.outer(exact_mean, exact_mean)
    standard_errors = np.sqrt(np.diag(exact_covariance) / num_samples)
    assert np.all(np.abs(samples.mean(axis=0) - exact_mean) < Z_TOLERANCE * standard_errors)
    centered = samples - exact_mean
    assert_means_within(centered[:, :, None] * centered[:, None, :], exact_covariance)


def one_dimensional_kolmogorov_smirnov_p_value() -> float:
    """One-sample KS of 5 000 draws of a two-component 1-D mixture against its CDF: it rejects
    (p <= 1e-4) a CDF distance above 0.031 (the critical distance, ``scipy.stats.kstwo``)."""
    weights, means, scales = np.array([0.2, 0.8]), np.array([-2.0, 1.0]), np.array([0.5, 1.5])
    denoiser = GaussianMixtureDenoiser(weights, means[:, None], (scales**2)[:, None, None])
    samples = np.asarray(denoiser.sample(jax.random.key(11), 5_000))[:, 0]

    def mixture_cdf(values: np.ndarray) -> np.ndarray:
        return np.sum(weights * stats.norm.cdf(values[:, None], loc=means, scale=scales), axis=1)

    return stats.kstest(samples, mixture_cdf).pvalue


def test_sample_one_dimensional_kolmogorov_smirnov() -> None:
    assert one_dimensional_kolmogorov_smirnov_p_value() > 1e-4


def test_the_same_check_rejects_weights_passed_as_logits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``sample`` that draws the component from the weights taken as logits (softmax of
    (0.2, 0.8): 0.35 and 0.65) fails the same KS check."""
    categorical = jax.random.categorical
    monkeypatch.setattr(
        jax.random,
        "categorical",
        lambda key, logits, **options: categorical(key, jnp.exp(logits), **options),
    )
    jax.clear_caches()  # the jitted sample traced afresh with the broken draw, and dropped after
    try:
        assert one_dimensional_kolmogorov_smirnov_p_value() <= 1e-4
    finally:
        jax.clear_caches()


def test_log_prob_matches_scipy(
    denoiser: GaussianMixtureDenoiser, parameters: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    weights, means, covariances = parameters
    points = np.random.default_rng(12).normal(scale=2.0, size=(10, DIM))
    expected = special.logsumexp(
        [
            np.log(weight) + stats.multivariate_normal.logpdf(points, mean=mean, cov=covariance)
            for weight, mean, covariance in zip(weights, means, covariances, strict=True)
        ],
        axis=0,
    )
    np.testing.assert_allclose(jax.vmap(denoiser.log_prob)(points), expected, rtol=1e-5)


def test_weights_are_normalised(parameters: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    weights, means, covariances = parameters
    scaled = GaussianMixtureDenoiser(7.0 * weights, means, covariances)
    np.testing.assert_allclose(scaled.weights, weights, rtol=1e-6)
    y = jnp.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(scaled(1.5, y), GaussianMixtureDenoiser(*parameters)(1.5, y))


def test_isotropic_covariances() -> None:
    means = np.zeros((2, 3))
    shared = GaussianMixtureDenoiser.isotropic(np.ones(2), means, 0.5)
    np.testing.assert_allclose(shared.covariances, np.broadcast_to(0.25 * np.eye(3), (2, 3, 3)))
    separate = GaussianMixtureDenoiser.isotropic(np.ones(2), means, np.array([1.0, 2.0]))
    np.testing.assert_allclose(separate.covariances[1], 4.0 * np.eye(3))
    with pytest.raises(ValueError, match=r"scale must be a scalar or have shape \(2,\)"):
        GaussianMixtureDenoiser.isotropic(np.ones(2), means, np.ones(3))


def test_jit_vmap_and_pytree(denoiser: GaussianMixtureDenoiser) -> None:
    times, observations, eager = eager_calls(denoiser, 13)
    np.testing.assert_allclose(jax.jit(denoiser)(times[0], observations[0]), eager[0], rtol=1e-5)
    batched = jax.jit(jax.vmap(denoiser))(times, observations)
    np.testing.assert_allclose(batched, eager, rtol=1e-5, atol=1e-6)
    assert batched.dtype == jnp.float32
    through_jit = jax.jit(jax.vmap(lambda model, t, y: model(t, y), in_axes=(None, 0, 0)))(
        denoiser, times, observations
    )
    np.testing.assert_allclose(through_jit, eager, rtol=1e-5, atol=1e-6)


def test_attributes(denoiser: GaussianMixtureDenoiser) -> None:
    assert denoiser.dim == DIM
    assert denoiser.num_components == NUM_COMPONENTS
    assert repr(denoiser) == "GaussianMixtureDenoiser(num_components=3, dim=3)"


@pytest.mark.parametrize(
    ("weights", "means", "covariances", "pattern"),
    [
        (np.ones((2, 1)), np.zeros((2, 2)), np.zeros((2, 2, 2)), r"weights must have shape \(K,\)"),
        (np.ones(2), np.zeros((3, 2)), np.zeros((2, 2, 2)), r"means must have shape \(2, dim\)"),
        (
            np.ones(2),
            np.zeros((2, 2)),
            np.zeros((2, 2)),
            r"covariances must have shape \(2, 2, 2\)",
        ),
        (np.array([1.0, -0.1]), np.zeros((2, 1)), np.ones((2, 1, 1)), "non-negative"),
        (np.zeros(2), np.zeros((2, 1)), np.ones((2, 1, 1)), "positive sum"),
        (np.ones(1), np.array([[np.inf]]), np.ones((1, 1, 1)), "means must be finite"),
        (np.ones(1), np.zeros((1, 2)), np.array([[[1.0, 0.5], [0.0, 1.0]]]), "not symmetric"),
        (np.ones(1), np.zeros((1, 2)), np.array([[[1.0, 2.0], [2.0, 1.0]]]), "positive semi-def"),
    ],
)
def test_constructor_rejects_bad_parameters(
    weights: np.ndarray, means: np.ndarray, covariances: np.ndarray, pattern: str
) -> None:
    with pytest.raises(ValueError, match=pattern):
        GaussianMixtureDenoiser(weights, means, covariances)


def test_call_rejects_batched_inputs(denoiser: GaussianMixtureDenoiser) -> None:
    with pytest.raises(ValueError, match=r"y must have shape \(3,\)"):
        denoiser(1.0, jnp.zeros((2, DIM)))
    with pytest.raises(ValueError, match="t must be a scalar"):
        denoiser(jnp.ones(2), jnp.zeros(DIM))
