r"""A learned, time-conditioned denoiser for stochastic localization.

The oracle of the diffusion process (section 2b of docs/algorithm.md; Anari et al., *Parallel
Sampling via Autospeculation*, arXiv:2511.07869) is :math:`f(t, y) = \mathbb{E}[Y \mid tY + W_t
= y]`; for data known only through samples it is learned around a Gaussian proxy.

**Gaussian proxy.**  With :math:`Y_i \sim \mathcal{N}(m_i, s_i^2)` independent (``data_mean``
:math:`m`, ``data_scale`` :math:`s`, per coordinate of the training data),

.. math::

    \mathbb{E}[Y_i \mid y] = m_i + s_i u_i, \quad
    u_i = \frac{s_i (y_i - t m_i)}{1 + s_i^2 t}, \qquad
    \operatorname{sd}(Y_i \mid y) = \sigma_i(t) = \frac{s_i}{\sqrt{1 + s_i^2 t}},

:math:`u` the *normalized observation*.  **Network** (preconditioned as in Karras et al., 2022):

.. math::

    f_\theta(t, y) = m + s \odot u + \sigma(t) \odot
        \operatorname{MLP}_\theta\big(u,\ \sin(\omega r),\ \cos(\omega r)\big),
    \qquad r = \log(1 + \bar s^2 t),

with :math:`\bar s^2` the mean of :math:`s_i^2` and :math:`\omega` ``num_frequencies``
geometric frequencies from :math:`2^{-3}` to :math:`2^{3}`.  With the MLP at zero the network is
the proxy's exact denoiser; a constant coordinate (:math:`s_i = 0`) is denoised exactly to
:math:`m_i`.  Sampling draws exactly the law of the Euler-Maruyama chain *of the network*.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import real_parameter
from numpyro_autospec.errors import DenoiserError, positive_integer
from numpyro_autospec.learned._network import mlp_forward, mlp_layers

__all__ = ["LearnedDenoiser", "data_statistics"]

_LOWEST_FREQUENCY_EXPONENT = -3.0
_HIGHEST_FREQUENCY_EXPONENT = 3.0


def data_statistics(data: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""``(data_mean, data_scale)``: per-coordinate mean and standard deviation of concrete
    data ``float[N >= 2, d]`` (float32 numpy); ``DenoiserError`` for bad data."""
    if isinstance(data, jax.core.Tracer):
        raise DenoiserError("data_statistics: data must be concrete (numpy or JAX), not traced")
    array = np.asarray(data)
    if array.ndim != 2 or array.shape[0] < 2 or array.shape[1] < 1:
        raise DenoiserError(
            f"data_statistics: data must have shape [num_examples >= 2, dim >= 1], "
            f"got {array.shape}"
        )
    array = real_parameter(array, "data", owner="data_statistics", error=DenoiserError)
    return array.mean(axis=0).astype(np.float32), array.std(axis=0).astype(np.float32)


class LearnedDenoiser(eqx.Module):
    r"""A time-conditioned MLP denoiser ``(t: float32[], y: float32[d]) -> float32[d]``.

    :math:`f_\theta(t, y) = m + s \odot u + \sigma(t) \odot \operatorname{MLP}_\theta(u,
    \sin \omega r, \cos \omega r)` (module docstring).  The last layer starts at zero, so an
    untrained network is the Gaussian proxy's exact denoiser.  An ``equinox.Module`` satisfying
    the :class:`~numpyro_autospec.denoisers.Denoiser` protocol.

    :param dim: :math:`d`.
    :param data_mean: :math:`m`, ``float[d]``, finite (may be traced).
    :param data_scale: :math:`s`, ``float[d]``, finite and :math:`\ge 0` (may be traced);
        :func:`data_statistics` computes both from data.
    :param hidden_size: units per hidden layer.
    :param depth: hidden layers, :math:`\ge 1`.
    :param num_frequencies: sinusoidal time frequencies.
    :param activation: elementwise JAX function.
    :param key: PRNG key of the initial weights.
    :raises DenoiserError: for a bad size, or a ``data_mean`` / ``data_scale`` of the wrong
        shape, non-finite or (scale) negative.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import Denoiser, validate_denoiser
    >>> denoiser = LearnedDenoiser(2, jnp.array([0.5, 0.0]), jnp.array([0.5, 0.0]),
    ...                            hidden_size=8, key=jax.random.PRNGKey(0))
    >>> isinstance(denoiser, Denoiser), denoiser(0.0, jnp.zeros(2)).tolist()  # t = 0: E[Y]
    (True, [0.5, 0.0])
    >>> validate_denoiser(denoiser, 2)
    >>> jax.vmap(denoiser)(jnp.ones(3), jnp.ones((3, 2))).shape
    (3, 2)
    """

    layers: tuple[eqx.nn.Linear, ...]
    data_mean: Array
    data_scale: Array
    dim: int = eqx.field(static=True)
    num_frequencies: int = eqx.field(static=True)
    activation: Callable[[Array], Array] = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        data_mean: ArrayLike,
        data_scale: ArrayLike,
        hidden_size: int = 256,
        depth: int = 3,
        num_frequencies: int = 8,
        activation: Callable[[Array], Array] = jax.nn.gelu,
        *,
        key: Array,
    ) -> None:
        dim = positive_integer(dim, "LearnedDenoiser: dim", DenoiserError)
        hidden_size = positive_integer(hidden_size, "LearnedDenoiser: hidden_size", DenoiserError)
        depth = positive_integer(depth, "LearnedDenoiser: depth", DenoiserError)
        num_frequencies = positive_integer(
            num_frequencies, "LearnedDenoiser: num_frequencies", DenoiserError
        )
        owner = "LearnedDenoiser"
        mean = real_parameter(
            data_mean, "data_mean", owner=owner, shape=(dim,), error=DenoiserError
        )
        scale = real_parameter(
            data_scale, "data_scale", owner=owner, shape=(dim,), minimum=0.0, error=DenoiserError
        )
        layers = mlp_layers([dim + 2 * num_frequencies] + [hidden_size] * depth + [dim], key)
        last = layers[-1]
        layers[-1] = eqx.tree_at(
            lambda layer: (layer.weight, layer.bias),
            last,
            (jnp.zeros_like(last.weight), jnp.zeros_like(last.bias)),
        )
        self.layers = tuple(layers)
        self.data_mean = jnp.asarray(mean, jnp.float32)
        self.data_scale = jnp.asarray(scale, jnp.float32)
        self.dim = dim
        self.num_frequencies = num_frequencies
        self.activation = activation

    @property
    def hidden_size(self) -> int:
        """Units per hidden layer."""
        return self.layers[0].out_features

    @property
    def depth(self) -> int:
        """Hidden layers."""
        return len(self.layers) - 1

    def _check(self, t: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
        t = jnp.asarray(t, jnp.float32)
        y = jnp.asarray(y, jnp.float32)
        if t.shape != () or y.shape != (self.dim,):
            raise DenoiserError(
                f"LearnedDenoiser: t must be a scalar and y of shape ({self.dim},) (one query; "
                f"jax.vmap for a batch), got shapes {t.shape} and {y.shape}"
            )
        return t, y

    def time_features(self, t: ArrayLike) -> Array:
        r""":math:`[\sin \omega r, \cos \omega r]`, ``float32[2 * num_frequencies]``."""
        mean_variance = jnp.mean(self.data_scale**2)
        r = jnp.log1p(mean_variance * jnp.asarray(t, jnp.float32))
        exponents = jnp.linspace(
            _LOWEST_FREQUENCY_EXPONENT, _HIGHEST_FREQUENCY_EXPONENT, self.num_frequencies
        )
        phases = (2.0**exponents) * r
        return jnp.concatenate([jnp.sin(phases), jnp.cos(phases)])

    def proxy(self, t: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""``(u, proxy_mean, proxy_sd)``: :math:`u`, :math:`m + s \odot u`, :math:`\sigma(t)`."""
        t, y = self._check(t, y)
        variance_factor = 1.0 + self.data_scale**2 * t
        u = self.data_scale * (y - t * self.data_mean) / variance_factor
        return (
            u,
            self.data_mean + self.data_scale * u,
            self.data_scale * jax.lax.rsqrt(variance_factor),
        )

    def correction(self, t: ArrayLike, u: Array) -> Array:
        r""":math:`\operatorname{MLP}_\theta(u, \sin \omega r, \cos \omega r)`, ``float32[d]``."""
        hidden = jnp.concatenate([u, self.time_features(t)])
        return mlp_forward(self.layers, self.activation, hidden)

    def __call__(self, t: ArrayLike, y: ArrayLike) -> Array:
        r""":math:`f_\theta(t, y) \approx \mathbb{E}[Y \mid tY + W_t = y]`, ``float32[d]``."""
        u, proxy_mean, proxy_sd = self.proxy(t, y)
        return proxy_mean + proxy_sd * self.correction(t, u)
