r"""Exact denoiser of a mixture of Gaussians.

Let :math:`Y \sim \sum_k \pi_k \mathcal{N}(m_k, S_k)` and :math:`y = tY + W_t` as in stochastic
localization (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869).  With
:math:`A_k = I + tS_k`, :math:`y \mid k \sim \mathcal{N}(t m_k, t A_k)` and :math:`u_k = y -
tm_k`, dropping the component-independent terms,

.. math::

    \mathbb{E}[Y \mid y, k] &= m_k + S_k A_k^{-1} u_k,\\
    P(k \mid y) &= \operatorname{softmax}_k\left(\log \pi_k - \tfrac12 \log\det A_k
        + \langle y, m_k \rangle - \tfrac{t}{2}\lVert m_k \rVert^2
        + \tfrac12 u_k^\top S_k A_k^{-1} u_k\right),\\
    \mathbb{E}[Y \mid tY + W_t = y] &= \sum_k P(k \mid y)\, \mathbb{E}[Y \mid y, k].

With :math:`S_k = 0` this is the point-cloud formula.  Each covariance is diagonalised once,
:math:`S_k = Q_k \operatorname{diag}(\lambda_k) Q_k^\top`, so a call costs :math:`O(Kd^2)` and
never inverts :math:`S_k` (singular covariances are allowed).  For :math:`t \ge 1` the logits
use the equivalent form :math:`\log \pi_k - \tfrac12 \log\det A_k - \tfrac{1}{2t} u_k^\top
A_k^{-1} u_k`, free of cancelling :math:`O(t)` terms; coordinates are centred at
:math:`\mathbb{E}[Y]`.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import is_traced
from numpyro_autospec.denoisers._base import ArrayDenoiser
from numpyro_autospec.errors import DenoiserError

__all__ = ["GaussianMixtureDenoiser"]

_HIGHEST = jax.lax.Precision.HIGHEST
_SYMMETRY_TOLERANCE = 1e-5
_EIGENVALUE_TOLERANCE = 1e-4
_SAMPLE_BATCH_SIZE = 1024
_LARGE_TIME = 1.0  # from here on the logits use the form without cancellation


@jax.jit
def _prepare_mixture(
    weights: Array, means: Array, covariances: Array
) -> tuple[tuple[Array, ...], Array]:
    """The leaves of the mixture (``GaussianMixtureDenoiser._leaves``) and the raw eigenvalues."""
    weights = weights / jnp.sum(weights)
    covariances = 0.5 * (covariances + jnp.swapaxes(covariances, -1, -2))
    eigenvalues, eigenvectors = jnp.linalg.eigh(covariances)
    center = jnp.matmul(weights, means, precision=_HIGHEST)
    centered_means = means - center[None, :]
    half_squared_norms = 0.5 * jnp.sum(centered_means**2, axis=-1)
    leaves = (
        weights,
        means,
        covariances,
        jnp.log(weights),
        center,
        centered_means,
        half_squared_norms,
        jnp.maximum(eigenvalues, 0.0),
        eigenvectors,
    )
    return leaves, eigenvalues


@jax.tree_util.register_pytree_node_class
class GaussianMixtureDenoiser(ArrayDenoiser):
    r"""Posterior mean of :math:`Y \sim \sum_k \pi_k \mathcal{N}(m_k, S_k)` given :math:`tY+W_t=y`.

    See the module docstring for the formulas.  A JAX pytree with jitted methods.

    :param weights: non-negative array of shape ``(K,)`` with a positive sum, normalised to
        :math:`\pi`.
    :param means: array of shape ``(K, d)``, the component means :math:`m_k`.
    :param covariances: array of shape ``(K, d, d)``, symmetric positive semi-definite
        :math:`S_k` (singular, even zero, is allowed except for :meth:`log_prob`).

    >>> import jax.numpy as jnp
    >>> denoiser = GaussianMixtureDenoiser.isotropic(
    ...     jnp.array([0.5, 0.5]), jnp.array([[-1.0, 0.0], [1.0, 0.0]]), 0.5
    ... )
    >>> denoiser(0.0, jnp.zeros(2)).tolist()  # t = 0: the mean of the mixture
    [0.0, 0.0]
    >>> one_component = GaussianMixtureDenoiser(jnp.ones(1), jnp.ones((1, 1)), jnp.ones((1, 1, 1)))
    >>> float(one_component(1.0, jnp.array([3.0]))[0])  # N(1, 1): 1 + (3 - 1) / 2
    2.0
    """

    weights: Array
    means: Array
    covariances: Array
    _leaves = (
        "weights",
        "means",
        "covariances",
        "_log_weights",
        "_center",
        "_centered_means",
        "_half_squared_norms",
        "_eigenvalues",
        "_eigenvectors",
    )

    def __init__(self, weights: ArrayLike, means: ArrayLike, covariances: ArrayLike):
        weights = jnp.asarray(weights, dtype=jnp.float32)
        means = jnp.asarray(means, dtype=jnp.float32)
        covariances = jnp.asarray(covariances, dtype=jnp.float32)
        if weights.ndim != 1 or weights.shape[0] < 1:
            raise DenoiserError(
                f"GaussianMixtureDenoiser: weights must have shape (K,) with K >= 1, got "
                f"{weights.shape}"
            )
        num_components = weights.shape[0]
        if means.ndim != 2 or means.shape[0] != num_components or means.shape[1] < 1:
            raise DenoiserError(
                f"GaussianMixtureDenoiser: means must have shape ({num_components}, dim) to match "
                f"weights, got {means.shape}"
            )
        dim = means.shape[1]
        if covariances.shape != (num_components, dim, dim):
            raise DenoiserError(
                f"GaussianMixtureDenoiser: covariances must have shape ({num_components}, {dim}, "
                f"{dim}), got {covariances.shape}"
            )
        concrete = not is_traced((weights, means, covariances))
        if concrete:
            _check_parameters(np.asarray(weights), np.asarray(means), np.asarray(covariances))
        leaves, raw_eigenvalues = _prepare_mixture(weights, means, covariances)
        if concrete:
            _check_eigenvalues(np.asarray(raw_eigenvalues))
        self._set_leaves(leaves)

    @classmethod
    def isotropic(
        cls, weights: ArrayLike, means: ArrayLike, scale: ArrayLike
    ) -> "GaussianMixtureDenoiser":
        r"""Mixture with covariances :math:`S_k = \sigma_k^2 I`.

        :param weights: shape ``(K,)``, as for the constructor.
        :param means: shape ``(K, d)``.
        :param scale: standard deviation :math:`\sigma`, a scalar or of shape ``(K,)``.
        """
        means = jnp.asarray(means, dtype=jnp.float32)
        if means.ndim != 2:
            raise DenoiserError(
                f"GaussianMixtureDenoiser: means must have shape (K, dim), got {means.shape}"
            )
        num_components, dim = means.shape
        scale = jnp.asarray(scale, dtype=jnp.float32)
        if scale.shape not in ((), (num_components,)):
            raise DenoiserError(
                f"GaussianMixtureDenoiser: scale must be a scalar or have shape "
                f"({num_components},), got {scale.shape}"
            )
        variances = jnp.broadcast_to(scale**2, (num_components,))
        covariances = variances[:, None, None] * jnp.eye(dim, dtype=jnp.float32)[None, :, :]
        return cls(weights, means, covariances)

    @property
    def dim(self) -> int:
        """The dimension :math:`d`."""
        return self.means.shape[1]

    @property
    def num_components(self) -> int:
        """The number of components :math:`K`."""
        return self.means.shape[0]

    @property
    def mean(self) -> Array:
        r""":math:`\mathbb{E}[Y] = \sum_k \pi_k m_k`, shape ``(d,)``."""
        return self._center

    def _posterior(self, t: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
        """Log component weights ``(K,)`` and centred component posterior means ``(K, d)``."""
        t = self._check_time(t)
        y = self._check_state(y)
        centered_state = y - t * self._center
        residuals = centered_state[None, :] - t * self._centered_means
        coordinates = jnp.einsum("kji,kj->ki", self._eigenvectors, residuals, precision=_HIGHEST)
        shrinkage = self._eigenvalues / (1.0 + t * self._eigenvalues)
        scaled_coordinates = shrinkage * coordinates
        corrections = jnp.einsum(
            "kij,kj->ki", self._eigenvectors, scaled_coordinates, precision=_HIGHEST
        )
        log_determinants = jnp.sum(jnp.log1p(t * self._eigenvalues), axis=-1)
        # Two forms of the same logits, which differ by the k-independent |y|^2 / (2t): the
        # first has no division by t, the second no cancellation between O(t) terms.
        small_time_fit = (
            jnp.matmul(self._centered_means, centered_state, precision=_HIGHEST)
            - t * self._half_squared_norms
            + 0.5 * jnp.sum(scaled_coordinates * coordinates, axis=-1)
        )
        safe_time = jnp.maximum(t, _LARGE_TIME)
        large_time_fit = -0.5 * jnp.sum(
            coordinates**2 / (safe_time * (1.0 + safe_time * self._eigenvalues)), axis=-1
        )
        fit = jnp.where(t >= _LARGE_TIME, large_time_fit, small_time_fit)
        logits = self._log_weights - 0.5 * log_determinants + fit
        return jax.nn.log_softmax(logits), self._centered_means + corrections

    @jax.jit
    def log_posterior_weights(self, t: ArrayLike, y: ArrayLike) -> Array:
        r"""Log posterior component probabilities :math:`\log P(k \mid tY + W_t = y)`, ``(K,)``."""
        return self._posterior(t, y)[0]

    @jax.jit
    def posterior_weights(self, t: ArrayLike, y: ArrayLike) -> Array:
        r"""Posterior component probabilities :math:`P(k \mid tY + W_t = y)`, shape ``(K,)``."""
        return jnp.exp(self.log_posterior_weights(t, y))

    @jax.jit
    def __call__(self, t: ArrayLike, y: ArrayLike) -> Array:
        r""":math:`\mathbb{E}[Y \mid tY + W_t = y]`, shape ``(d,)``."""
        log_weights, component_means = self._posterior(t, y)
        return self._center + jnp.matmul(jnp.exp(log_weights), component_means, precision=_HIGHEST)

    @jax.jit
    def log_prob(self, y: ArrayLike) -> Array:
        r"""Log density :math:`\log \sum_k \pi_k \mathcal{N}(y; m_k, S_k)` of :math:`Y` (positive
        definite covariances only), scalar."""
        y = self._check_state(y)
        residuals = y[None, :] - self.means
        coordinates = jnp.einsum("kji,kj->ki", self._eigenvectors, residuals, precision=_HIGHEST)
        mahalanobis = jnp.sum(coordinates**2 / self._eigenvalues, axis=-1)
        log_determinants = jnp.sum(jnp.log(self._eigenvalues), axis=-1)
        component_log_densities = -0.5 * (
            self.dim * math.log(2.0 * math.pi) + log_determinants + mahalanobis
        )
        return jax.nn.logsumexp(self._log_weights + component_log_densities)

    @functools.partial(jax.jit, static_argnames="num")
    def sample(self, key: Array, num: int) -> Array:
        r"""Draw ``num`` exact samples of :math:`Y`, shape ``(num, d)``."""
        component_key, noise_key = jax.random.split(key)
        components = jax.random.categorical(component_key, self._log_weights, shape=(num,))
        noise = jax.random.normal(noise_key, (num, self.dim), dtype=jnp.float32)

        def draw_one(component_and_noise: tuple[Array, Array]) -> Array:
            component, standard_normal = component_and_noise
            scaled = jnp.sqrt(self._eigenvalues[component]) * standard_normal
            return self.means[component] + jnp.matmul(
                self._eigenvectors[component], scaled, precision=_HIGHEST
            )

        batch_size = max(1, min(num, _SAMPLE_BATCH_SIZE))
        return jax.lax.map(draw_one, (components, noise), batch_size=batch_size)

    def __repr__(self) -> str:
        return f"GaussianMixtureDenoiser(num_components={self.num_components}, dim={self.dim})"


def _check_parameters(weights: np.ndarray, means: np.ndarray, covariances: np.ndarray) -> None:
    owner = "GaussianMixtureDenoiser"
    for name, values in (("weights", weights), ("means", means), ("covariances", covariances)):
        if not np.all(np.isfinite(values)):
            index = [int(i) for i in np.argwhere(~np.isfinite(values))[0]]
            raise DenoiserError(f"{owner}: {name} must be finite, got {name}{index} = nan or inf")
    if np.any(weights < 0):
        index = int(np.flatnonzero(weights < 0)[0])
        raise DenoiserError(
            f"{owner}: weights must be non-negative, got weights[{index}] = {weights[index]}"
        )
    if not weights.sum() > 0:
        raise DenoiserError(f"{owner}: weights must have a positive sum, got {weights.sum()}")
    asymmetry = np.max(np.abs(covariances - np.swapaxes(covariances, -1, -2)), axis=(-2, -1))
    magnitude = np.max(np.abs(covariances), axis=(-2, -1))
    asymmetric = np.flatnonzero(asymmetry > _SYMMETRY_TOLERANCE * np.maximum(magnitude, 1e-30))
    if asymmetric.size > 0:
        index = int(asymmetric[0])
        raise DenoiserError(
            f"{owner}: covariances[{index}] is not symmetric "
            f"(max |S - S^T| = {asymmetry[index]:.3g})"
        )


def _check_eigenvalues(eigenvalues: np.ndarray) -> None:
    largest = np.max(np.abs(eigenvalues), axis=-1)
    smallest = np.min(eigenvalues, axis=-1)
    indefinite = np.flatnonzero(smallest < -_EIGENVALUE_TOLERANCE * largest)
    if indefinite.size > 0:
        index = int(indefinite[0])
        raise DenoiserError(
            f"GaussianMixtureDenoiser: covariances[{index}] is not positive semi-definite "
            f"(smallest eigenvalue {smallest[index]:.3g})"
        )
