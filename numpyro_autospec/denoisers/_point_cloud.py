r"""Exact denoiser of the uniform distribution over a finite set of points.

For :math:`Y` uniform over :math:`p_1, \dots, p_M \in \mathbb{R}^d` and :math:`y \sim
\mathcal{N}(tY, tI)` as in stochastic localization (Anari et al., *Parallel Sampling via
Autospeculation*, arXiv:2511.07869), the terms of :math:`\log \mathcal{N}(y; t p_j, tI)` that do
not depend on :math:`j` drop out of the posterior over points:

.. math::

    w_j(t, y) = \operatorname{softmax}_j\left(\langle y, p_j \rangle
                - \frac{t}{2}\lVert p_j \rVert^2\right),
    \qquad
    \mathbb{E}[Y \mid tY + W_t = y] = \sum_{j=1}^M w_j(t, y)\, p_j,

with no division by :math:`t` (exact down to :math:`t = 0`), computed centred at the mean.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import is_traced
from numpyro_autospec.denoisers._base import ArrayDenoiser
from numpyro_autospec.errors import DenoiserError

__all__ = ["PointCloudDenoiser"]

_HIGHEST = jax.lax.Precision.HIGHEST


@jax.jit
def _center_points(points: Array) -> tuple[Array, Array, Array]:
    mean = jnp.mean(points, axis=0)
    centered_points = points - mean[None, :]
    return mean, centered_points, 0.5 * jnp.sum(centered_points**2, axis=-1)


@jax.tree_util.register_pytree_node_class
class PointCloudDenoiser(ArrayDenoiser):
    r"""Posterior mean of :math:`Y` uniform over a point cloud, given :math:`tY + W_t = y`.

    Computes :math:`\sum_j w_j(t, y) p_j` (module docstring) in :math:`O(Md)`.  A JAX pytree
    (the points are its leaves) with jitted methods.

    :param points: float array of shape ``(M, d)``, the support of :math:`Y`, each point with
        probability :math:`1/M`.
    :param labels: optional array of shape ``(M,)`` carried along (e.g. the class of each
        point); not used by the denoiser.

    >>> import jax, jax.numpy as jnp
    >>> denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 2.0]]))
    >>> denoiser(0.0, jnp.zeros(2)).tolist()  # t = 0: the mean of the points
    [0.5, 1.0]
    >>> far = denoiser(1e4, 1e4 * jnp.array([1.0, 2.0]))  # large t: the observed point
    >>> bool(jnp.allclose(far, jnp.array([1.0, 2.0])))
    True
    >>> jax.vmap(denoiser)(jnp.zeros(3), jnp.zeros((3, 2))).shape
    (3, 2)
    """

    points: Array
    labels: Array | None
    _leaves = ("points", "labels", "_mean", "_centered_points", "_half_squared_norms")

    def __init__(self, points: ArrayLike, labels: ArrayLike | None = None):
        points = jnp.asarray(points, dtype=jnp.float32)
        if points.ndim != 2 or points.shape[0] < 1 or points.shape[1] < 1:
            raise DenoiserError(
                f"PointCloudDenoiser: points must have shape (num_points, dim) with both "
                f"positive, got {points.shape}"
            )
        if not is_traced(points) and not np.all(np.isfinite(np.asarray(points))):
            index = [int(i) for i in np.argwhere(~np.isfinite(np.asarray(points)))[0]]
            raise DenoiserError(f"PointCloudDenoiser: points must be finite, got points{index}")
        if labels is not None:
            labels = jnp.asarray(labels)
            if labels.shape != points.shape[:1]:
                raise DenoiserError(
                    f"PointCloudDenoiser: labels must have shape ({points.shape[0]},) to match "
                    f"points, got {labels.shape}"
                )
        self.points = points
        self.labels = labels
        self._mean, self._centered_points, self._half_squared_norms = _center_points(points)

    @property
    def dim(self) -> int:
        """The dimension :math:`d`."""
        return self.points.shape[1]

    @property
    def num_points(self) -> int:
        """The number of points :math:`M`."""
        return self.points.shape[0]

    @property
    def mean(self) -> Array:
        r""":math:`\mathbb{E}[Y]`, the mean of the points, shape ``(d,)``."""
        return self._mean

    @jax.jit
    def log_posterior_weights(self, t: ArrayLike, y: ArrayLike) -> Array:
        r"""Log posterior probabilities :math:`\log w_j(t, y)` of the points, shape ``(M,)``."""
        t = self._check_time(t)
        y = self._check_state(y)
        centered_state = y - t * self._mean
        logits = (
            jnp.matmul(self._centered_points, centered_state, precision=_HIGHEST)
            - t * self._half_squared_norms
        )
        return jax.nn.log_softmax(logits)

    @jax.jit
    def posterior_weights(self, t: ArrayLike, y: ArrayLike) -> Array:
        r"""Posterior probabilities :math:`w_j(t, y) = P(Y = p_j \mid tY + W_t = y)`, ``(M,)``."""
        return jnp.exp(self.log_posterior_weights(t, y))

    @jax.jit
    def __call__(self, t: ArrayLike, y: ArrayLike) -> Array:
        r""":math:`\mathbb{E}[Y \mid tY + W_t = y] = \sum_j w_j(t, y) p_j`, shape ``(d,)``."""
        weights = self.posterior_weights(t, y)
        return self._mean + jnp.matmul(weights, self._centered_points, precision=_HIGHEST)

    @jax.jit
    def nearest(self, y: ArrayLike) -> Array:
        r"""Index (int32 scalar) of the point nearest to ``y``,
        :math:`\arg\max_j (\langle y, p_j \rangle - \lVert p_j \rVert^2/2)`."""
        y = self._check_state(y)
        scores = (
            jnp.matmul(self._centered_points, y - self._mean, precision=_HIGHEST)
            - self._half_squared_norms
        )
        return jnp.argmax(scores).astype(jnp.int32)

    @functools.partial(jax.jit, static_argnames="num")
    def sample(self, key: Array, num: int) -> Array:
        """Draw ``num`` exact samples of :math:`Y` (uniform over the points), shape ``(num, d)``."""
        indices = jax.random.randint(key, (num,), 0, self.num_points)
        return self.points[indices]

    def __repr__(self) -> str:
        return f"PointCloudDenoiser(num_points={self.num_points}, dim={self.dim})"
