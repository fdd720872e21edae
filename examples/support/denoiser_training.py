r"""Denoising regression for :class:`~numpyro_autospec.learned.LearnedDenoiser`.

The conditional mean is the minimiser of the squared error: for every :math:`t`,

.. math::

    f(t, \cdot) = \mathbb{E}[Y \mid tY + W_t = \cdot\,]
    = \operatorname*{arg\,min}_g\ \mathbb{E}\,\lVert Y - g(tY + \sqrt t\,\xi) \rVert^2,
    \qquad \xi \sim \mathcal{N}(0, I_d),

(:math:`W_t \sim \mathcal{N}(0, tI)`), the denoising score-matching objective written for the
denoiser (Vincent, 2011; Tweedie's formula
:math:`\nabla \log p_t(y) = f(t, y) - y/t`).  :func:`denoising_loss` averages it over data,
noise and times with the weight :math:`(1 + \bar s^2 t) / \bar s^2`, the inverse posterior
variance of the network's Gaussian proxy, so that every time contributes on the same scale
(the network's correction is a unit-scale target; :mod:`numpyro_autospec.learned._denoiser`):

.. math::

    L(\theta) = \mathbb{E}_{Y, t, \xi}\ \frac{1 + \bar s^2 t}{\bar s^2 d}
        \big\lVert Y - f_\theta(t, tY + \sqrt t\,\xi) \big\rVert^2 .

**Times** follow the law of the grid the sampler runs on,
:func:`~numpyro_autospec.processes.default_times`: uniform in
:math:`\log(1 + \sigma^2 t)` on :math:`[0, t_{\max}]` (:func:`training_times`), so the network
is trained where the Euler chain queries it, in proportion.  :func:`train_denoiser` minimises
:math:`L` with Adam (gradient clipping, cosine decay; Optax), seeded and with a ``tqdm``
bar; :func:`load_or_train_denoiser` caches the result with the project's checkpoints
(:func:`support.checkpoints.load_or_train`).  Samplers of the trained network: docs/
learned.md, "A learned denoiser" (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869).
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.errors import ConfigError, DenoiserError, positive_integer
from numpyro_autospec.learned import LearnedDenoiser
from numpyro_autospec.learned._denoiser import data_statistics
from numpyro_autospec.processes._time_grids import DEFAULT_DATA_VARIANCE, DEFAULT_T_MAX

from support.checkpoints import load_or_train

__all__ = [
    "DenoiserConfig",
    "denoising_loss",
    "load_or_train_denoiser",
    "train_denoiser",
    "training_times",
]


@dataclasses.dataclass(frozen=True)
class DenoiserConfig:
    """The architecture of a :class:`LearnedDenoiser` (JSON-serialisable, for checkpoints:
    :func:`support.checkpoints.load_or_train`).  ``build`` gives placeholder data
    statistics (mean 0, scale 1); the trained weights, mean and scale are leaves of the
    checkpoint.

    Example
    -------
    >>> import jax
    >>> config = DenoiserConfig(dim=4, hidden_size=16, depth=2)
    >>> network = config.build(jax.random.PRNGKey(0))
    >>> network(1.0, jax.numpy.zeros(4)).shape, network.data_mean.tolist()
    ((4,), [0.0, 0.0, 0.0, 0.0])
    """

    dim: int
    hidden_size: int = 256
    depth: int = 3
    num_frequencies: int = 8

    def build(self, key: Array) -> LearnedDenoiser:
        """A freshly initialised network of this architecture."""
        return LearnedDenoiser(
            self.dim,
            np.zeros(self.dim, np.float32),
            np.ones(self.dim, np.float32),
            hidden_size=self.hidden_size,
            depth=self.depth,
            num_frequencies=self.num_frequencies,
            key=key,
        )


def training_times(
    key: Array,
    shape: tuple[int, ...],
    t_max: float = DEFAULT_T_MAX,
    data_variance: float = DEFAULT_DATA_VARIANCE,
) -> Array:
    r"""Times :math:`t = (e^{U \log(1 + \sigma^2 t_{\max})} - 1)/\sigma^2`,
    :math:`U \sim \mathrm{Uniform}[0, 1]`: the continuous law of a uniformly chosen point of
    ``default_times(N, t_max, data_variance=sigma^2)``, ``float32[shape]`` in
    :math:`[0, t_{\max}]`.

    >>> import jax
    >>> times = training_times(jax.random.PRNGKey(0), (1000,), t_max=100.0)
    >>> bool(times.min() >= 0.0) and bool(times.max() <= 100.0)
    True
    """
    span = math.log1p(data_variance * t_max)
    uniform = jax.random.uniform(key, shape, jnp.float32)
    return jnp.minimum(jnp.expm1(uniform * span) / data_variance, t_max)


def denoising_loss(
    network: LearnedDenoiser,
    key: Array,
    batch: Array,
    t_max: float = DEFAULT_T_MAX,
    data_variance: float = DEFAULT_DATA_VARIANCE,
) -> Array:
    r"""Monte Carlo estimate of :math:`L(\theta)` on ``batch`` (``float32[B, d]``): one time
    (:func:`training_times`) and one noise draw per example; float32 scalar, differentiable in
    the network's weights.

    Example
    -------
    >>> import jax
    >>> from support.denoiser_training import DenoiserConfig
    >>> network = DenoiserConfig(dim=4, hidden_size=16, depth=2).build(jax.random.PRNGKey(0))
    >>> batch = jax.random.normal(jax.random.PRNGKey(1), (8, 4))
    >>> loss = denoising_loss(network, jax.random.PRNGKey(2), batch)
    >>> loss.shape, bool(loss > 0)
    ((), True)
    """
    key_times, key_noise = jax.random.split(key)
    times = training_times(key_times, batch.shape[:1], t_max, data_variance)
    noise = jax.random.normal(key_noise, batch.shape, jnp.float32)
    observations = times[:, None] * batch + jnp.sqrt(times)[:, None] * noise
    estimates = jax.vmap(network)(times, observations)
    mean_variance = jnp.mean(network.data_scale**2)
    weights = (1.0 + mean_variance * times) / mean_variance
    return jnp.mean(weights * jnp.mean((batch - estimates) ** 2, axis=-1))


def check_denoiser_data(data: ArrayLike, dim: int) -> np.ndarray:
    """Concrete, finite training data ``float32[N, dim]``, else a :class:`DenoiserError` naming
    the shape or the first bad entry."""
    data_statistics(data)  # shape, concreteness and finiteness, with named errors
    array = np.asarray(data, np.float32)
    if array.shape[1] != dim:
        raise DenoiserError(f"data must have {dim} columns (the network's dim), got {array.shape}")
    return array


def train_denoiser(
    key: Array,
    network: LearnedDenoiser,
    data: ArrayLike,
    num_steps: int,
    *,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
    t_max: float = DEFAULT_T_MAX,
    data_variance: float = DEFAULT_DATA_VARIANCE,
    progress_bar: bool = True,
) -> tuple[LearnedDenoiser, np.ndarray]:
    r"""``(trained network, losses)``: ``num_steps`` Adam steps on :func:`denoising_loss`.

    The network's ``data_mean`` and ``data_scale`` are first set to :func:`data_statistics`
    of ``data`` and then held fixed (only the MLP is trained).  Each step draws
    ``batch_size`` examples uniformly with replacement, one time and one noise per example;
    Adam with gradient clipping at global norm 1 and a cosine decay of the learning rate to a
    tenth of ``learning_rate``.  Everything random derives from ``key``.

    :param data: concrete ``float[N, d]`` examples of :math:`Y`.
    :param t_max: end of the time law (the sampler's grid end).
    :param data_variance: :math:`\sigma^2` of the time law (the sampler's grid).
    :param progress_bar: show a ``tqdm`` bar with the running loss.
    :return: the network and the batch loss before each step, float64 numpy ``[num_steps]``.
    :raises DenoiserError: for bad data; ``ConfigError`` for bad step settings.

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from numpyro_autospec.learned._denoiser import data_statistics
    >>> data = np.repeat([[0.0, 0.0], [1.0, 1.0]], 32, axis=0)  # two points, equally likely
    >>> initial = LearnedDenoiser(2, *data_statistics(data), hidden_size=16,
    ...                           key=jax.random.PRNGKey(0))  # the Gaussian proxy
    >>> network, losses = train_denoiser(jax.random.PRNGKey(1), initial, data, 300,
    ...                                  batch_size=64, learning_rate=1e-2, progress_bar=False)
    >>> key, batch = jax.random.PRNGKey(2), jnp.asarray(np.tile(data, (16, 1)))
    >>> before, after = denoising_loss(initial, key, batch), denoising_loss(network, key, batch)
    >>> losses.shape, bool(after < 0.7 * before)
    ((300,), True)
    """
    from tqdm.auto import tqdm

    data = check_denoiser_data(data, network.dim)
    num_steps = positive_integer(num_steps, "train_denoiser: num_steps", ConfigError)
    batch_size = positive_integer(batch_size, "train_denoiser: batch_size", ConfigError)
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ConfigError(f"train_denoiser: learning_rate must be positive, got {learning_rate}")
    mean, scale = data_statistics(data)
    if not np.any(scale > 0):
        raise DenoiserError(
            "train_denoiser: every coordinate of data is constant (nothing to denoise: the "
            "exact denoiser is the constant data_mean)"
        )
    network = eqx.tree_at(
        lambda n: (n.data_mean, n.data_scale), network, (jnp.asarray(mean), jnp.asarray(scale))
    )
    trainable = eqx.tree_at(
        lambda n: (n.data_mean, n.data_scale),
        jax.tree.map(eqx.is_inexact_array, network),
        (False, False),
    )
    schedule = optax.cosine_decay_schedule(learning_rate, num_steps, alpha=0.1)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))
    parameters, fixed = eqx.partition(network, trainable)
    state = optimizer.init(parameters)
    device_data = jnp.asarray(data)

    def loss_of(parameters, fixed, key, batch):
        return denoising_loss(eqx.combine(parameters, fixed), key, batch, t_max, data_variance)

    @eqx.filter_jit
    def step(parameters, fixed, state, key):
        key_batch, key_loss = jax.random.split(key)
        rows = jax.random.randint(key_batch, (batch_size,), 0, device_data.shape[0])
        loss, grads = jax.value_and_grad(loss_of)(parameters, fixed, key_loss, device_data[rows])
        updates, state = optimizer.update(grads, state, parameters)
        return optax.apply_updates(parameters, updates), state, loss

    losses = np.zeros(num_steps)
    bar = tqdm(range(num_steps), disable=not progress_bar, desc="training", unit="step")
    for index in bar:
        parameters, state, loss = step(parameters, fixed, state, jax.random.fold_in(key, index))
        losses[index] = float(loss)
        if index % 50 == 49:
            bar.set_postfix(loss=f"{losses[index - 49 : index + 1].mean():.4f}")
    return eqx.combine(parameters, fixed), losses


def _loss_curve(losses: np.ndarray, num_points: int = 200) -> list[float]:
    """Means of up to ``num_points`` consecutive, equal stretches of ``losses`` (JSON-able)."""
    stretch = max(1, len(losses) // num_points)
    usable = len(losses) // stretch * stretch
    return losses[:usable].reshape(-1, stretch).mean(axis=1).tolist()


def load_or_train_denoiser(
    name: str,
    config: DenoiserConfig,
    data: ArrayLike,
    num_steps: int,
    *,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
    t_max: float = DEFAULT_T_MAX,
    data_variance: float = DEFAULT_DATA_VARIANCE,
    seed: int = 0,
    cache: str | os.PathLike | None = None,
    retrain: bool = False,
    progress_bar: bool = True,
) -> tuple[LearnedDenoiser, dict[str, Any], Path]:
    """``(network, metadata, directory)``: :func:`train_denoiser` on ``data`` from
    ``config.build(PRNGKey(seed))`` with key ``PRNGKey(seed + 1)``, trained once and cached
    by :func:`support.checkpoints.load_or_train` (keyed by the architecture, the
    settings and a hash of the data).  ``metadata`` holds the training ``seconds``, the
    ``first_loss``, the ``final_loss`` (mean of the last 100 steps), the ``loss_curve`` (means
    of up to 200 consecutive stretches of steps) and ``loaded_from_cache``.

    Example
    -------
    >>> import tempfile, numpy as np
    >>> from support.denoiser_training import DenoiserConfig
    >>> data = np.random.default_rng(0).normal(size=(64, 4))
    >>> config = DenoiserConfig(dim=4, hidden_size=16, depth=2)
    >>> with tempfile.TemporaryDirectory() as cache:
    ...     _, first, _ = load_or_train_denoiser("toy", config, data, 5, cache=cache,
    ...                                          progress_bar=False)
    ...     _, again, _ = load_or_train_denoiser("toy", config, data, 5, cache=cache,
    ...                                          progress_bar=False)
    >>> first["loaded_from_cache"], again["loaded_from_cache"]
    (False, True)
    """
    import hashlib
    import time

    data = check_denoiser_data(data, config.dim)
    settings = {
        "num_steps": int(num_steps),
        "batch_size": int(batch_size),
        "learning_rate": float(learning_rate),
        "t_max": float(t_max),
        "data_variance": float(data_variance),
        "data": hashlib.sha256(data.tobytes()).hexdigest()[:16],
        "data_shape": list(data.shape),
    }

    def train(network: LearnedDenoiser) -> tuple[LearnedDenoiser, dict[str, Any]]:
        begin = time.perf_counter()
        network, losses = train_denoiser(
            jax.random.PRNGKey(seed + 1),
            network,
            data,
            num_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            t_max=t_max,
            data_variance=data_variance,
            progress_bar=progress_bar,
        )
        metadata = {
            "seconds": time.perf_counter() - begin,
            "first_loss": float(losses[0]),
            "final_loss": float(losses[-100:].mean()),
            "loss_curve": _loss_curve(losses),
        }
        return network, metadata

    return load_or_train(name, config, settings, train, seed=seed, cache=cache, retrain=retrain)
