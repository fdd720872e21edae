r"""The any-order autoregressive objective and a small Adam training loop.

For an order :math:`\sigma` of the :math:`n` sites, the sequential negative log-likelihood of
a configuration :math:`x` under the network :math:`p_\theta` is
:math:`\ell_\sigma(x) = -\sum_{k=0}^{n-1} \log p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)})`.
The any-order ARM objective (Uria et al., 2014; Hoogeboom et al., 2022) is its average over
uniformly random orders, :math:`L(x) = \mathbb{E}_\sigma\, \ell_\sigma(x)`.  Since
:math:`\log p_{\text{mix}}(x) = \log \mathbb{E}_\sigma e^{-\ell_\sigma(x)} \ge -L(x)` (Jensen),
:math:`L(x)` is an upper bound on :math:`-\log p_{\text{mix}}(x)`, where :math:`p_{\text{mix}}`
is the law the sampler draws from with a random order.

An unbiased one-query estimate: draw :math:`k \sim \mathrm{Uniform}\{0, \dots, n-1\}` and a
uniformly random subset :math:`S` of :math:`k` sites; then

.. math:: \hat L(x) = \frac{n}{n - k} \sum_{i \notin S} -\log p_\theta(x_i \mid x_S),
    \qquad \mathbb{E}_{k, S}\, \hat L(x) = L(x),

because the prefix :math:`\sigma(<k)` of a random order is a uniform :math:`k`-subset and the
next site :math:`\sigma(k)` is uniform among the :math:`n - k` others.  :func:`fit` minimises
the batch mean of :math:`\hat L` with ``optax.adam``; :func:`order_averaged_nll` estimates
:math:`L(x)` with whole orders (``n`` queries each) to evaluate a trained network.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.errors import ConfigError, InputError, positive_integer
from numpyro_autospec.learned._oracle import learned_log_marginals, network_sizes

__all__ = ["any_order_loss", "check_training_data", "fit", "order_averaged_nll"]


def check_training_data(data: ArrayLike, num_positions: int, num_categories: int) -> np.ndarray:
    """Check concrete training data and return it as int32 numpy ``[N, n]``.

    :raises InputError: naming the shape, the dtype, or the first value outside ``[0, q)``.

    >>> check_training_data([[0, 2], [1, 1]], 2, 3).dtype
    dtype('int32')
    >>> check_training_data([[0, 3]], 2, 3)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.InputError: data: value 3 at index (0, 1) ... [0, 3)
    """
    if isinstance(data, jax.core.Tracer):
        raise InputError("data must be concrete (a numpy or JAX array), not traced")
    array = np.asarray(data)
    n, q = int(num_positions), int(num_categories)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] != n:
        raise InputError(
            f"data must have shape [num_examples >= 1, num_positions = {n}], got {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise InputError(
            f"data must hold category indices with an integer dtype, got {array.dtype} "
            "(binarize or quantize real data first)"
        )
    outside = np.argwhere((array < 0) | (array >= q))
    if outside.size:
        index = tuple(int(i) for i in outside[0])
        raise InputError(
            f"data: value {int(array[index])} at index {index} is outside the categories [0, {q})"
        )
    return array.astype(np.int32)


def _example_loss(network: Callable, key: Array, x: Array) -> Array:
    r""":math:`\hat L(x)` for one configuration ``x: int32[n]`` (one oracle query)."""
    n = x.shape[0]
    key_size, key_subset = jax.random.split(key)
    size = jax.random.randint(key_size, (), 0, n)
    mask = jax.random.permutation(key_subset, n) < size  # a uniform subset of `size` sites
    log_probs = learned_log_marginals(network, x, mask)
    picked = jnp.take_along_axis(log_probs, x[:, None], axis=-1)[:, 0]
    return -(n / (n - size)) * jnp.sum(jnp.where(mask, 0.0, picked))


def any_order_loss(network: Callable, key: Array, batch: Array) -> Array:
    r"""Batch mean of the unbiased estimate :math:`\hat L(x)` of the order-averaged NLL (nats).

    One random mask size and subset per example, one query per example.

    :param network: ``(x: int32[n], mask: bool[n]) -> float[n, q]``, e.g. a ``MaskedMLP``.
    :param key: PRNG key of the masks.
    :param batch: ``int32[B, n]`` configurations.
    :return: float32 scalar, differentiable in the network's weights.

    A network answering the uniform law on :math:`\{0, 1\}^3` loses exactly :math:`3 \log 2`
    nats on every example, whatever the mask; a :class:`MaskedMLP`'s loss has gradients:

    >>> import math, jax, jax.numpy as jnp, equinox as eqx
    >>> from numpyro_autospec.learned import MaskedMLP
    >>> batch = jnp.array([[0, 1, 1], [1, 0, 0]])
    >>> uniform = lambda x, mask: jnp.zeros((3, 2))  # logits
    >>> loss = any_order_loss(uniform, jax.random.PRNGKey(0), batch)
    >>> round(float(loss), 4), round(3 * math.log(2), 4)
    (2.0794, 2.0794)
    >>> network = MaskedMLP(3, 2, hidden_size=8, key=jax.random.PRNGKey(1))
    >>> gradient = eqx.filter_grad(any_order_loss)(network, jax.random.PRNGKey(0), batch)
    >>> type(gradient).__name__
    'MaskedMLP'
    """
    keys = jax.random.split(key, batch.shape[0])
    return jnp.mean(jax.vmap(_example_loss, in_axes=(None, 0, 0))(network, keys, batch))


def _sequential_nll(network: Callable, key: Array, x: Array) -> Array:
    r""":math:`\ell_\sigma(x)` for one uniformly random order (``n`` queries in one batch)."""
    n = x.shape[0]
    rank = jax.random.permutation(key, n)  # rank[i]: when site i is fixed
    masks = rank[None, :] < jnp.arange(n)[:, None]  # masks[k]: the sites fixed before step k
    answers = jax.vmap(learned_log_marginals, in_axes=(None, None, 0))(network, x, masks)
    sites = jnp.argsort(rank)  # sites[k] = sigma(k)
    return -jnp.sum(answers[jnp.arange(n), sites, x[sites]])


_batched_sequential_nll = eqx.filter_jit(
    jax.vmap(jax.vmap(_sequential_nll, in_axes=(None, 0, None)), in_axes=(None, 0, 0))
)


def order_averaged_nll(
    key: Array, network: Callable, data: ArrayLike, num_orders: int = 1, chunk_size: int = 256
) -> np.ndarray:
    r"""Monte Carlo estimate of :math:`L(x) = \mathbb{E}_\sigma \ell_\sigma(x)` per example, nats.

    Each example gets ``num_orders`` independent uniformly random orders (``n`` queries each);
    the result is the mean of :math:`\ell_\sigma(x)` over them, an unbiased estimate of
    :math:`L(x) \ge -\log p_{\text{mix}}(x)`.

    :param key: PRNG key of the orders.
    :param network: the network (sizes ``num_positions`` and ``num_categories``).
    :param data: ``int[N, n]`` configurations, checked like :func:`fit`'s.
    :param num_orders: orders per example.
    :param chunk_size: examples per compiled batch.
    :return: float64 numpy ``[N]``.

    For the uniform law on :math:`\{0, 1\}^3` every order gives :math:`3 \log 2` nats:

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import FunctionOracle
    >>> uniform = FunctionOracle(lambda x, mask: jnp.zeros((3, 2)), 3, 2)
    >>> nll = order_averaged_nll(jax.random.PRNGKey(0), uniform, [[0, 1, 1], [1, 0, 0]], 4)
    >>> nll.dtype, nll.round(4).tolist()
    (dtype('float64'), [2.0794, 2.0794])
    """
    data = check_training_data(data, network.num_positions, network.num_categories)
    if num_orders < 1 or chunk_size < 1:
        raise ConfigError(
            f"need num_orders >= 1 and chunk_size >= 1, got {num_orders}, {chunk_size}"
        )
    num_examples = data.shape[0]
    chunk_size = min(int(chunk_size), num_examples)
    keys = jax.random.split(key, (num_examples, num_orders))
    padded = -(-num_examples // chunk_size) * chunk_size  # equal chunks: one compilation
    rows = np.arange(padded) % num_examples
    results = []
    for start in range(0, padded, chunk_size):
        chunk = rows[start : start + chunk_size]
        nll = _batched_sequential_nll(network, keys[chunk], jnp.asarray(data[chunk]))
        results.append(np.asarray(nll, np.float64).mean(axis=1))
    return np.concatenate(results)[:num_examples]


@functools.lru_cache(maxsize=16)
def _adam(learning_rate: float) -> optax.GradientTransformation:
    """One ``optax.adam`` per learning rate: ``_train_step`` sees the same (static) optimizer
    and compiles once across calls of :func:`fit` with the same settings and architecture."""
    return optax.adam(learning_rate)


@eqx.filter_jit
def _train_step(network, opt_state, key, data, optimizer, batch_size: int):
    """One Adam step on a batch of ``batch_size`` examples drawn with replacement from ``data``
    (``optimizer`` and ``batch_size`` are static: non-array arguments of ``filter_jit``)."""
    key_batch, key_masks = jax.random.split(key)
    batch = data[jax.random.randint(key_batch, (batch_size,), 0, data.shape[0])]
    loss, grads = eqx.filter_value_and_grad(any_order_loss)(network, key_masks, batch)
    params = eqx.filter(network, eqx.is_inexact_array)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(network, updates), opt_state, loss


def fit(
    key: Array,
    network: eqx.Module,
    data: ArrayLike,
    num_steps: int,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    *,
    optimizer: optax.GradientTransformation | None = None,
) -> tuple[eqx.Module, np.ndarray]:
    r"""Train ``network`` on ``data`` with the any-order objective :math:`\hat L` and Adam.

    Each step draws ``batch_size`` examples uniformly with replacement, one random mask per
    example, and takes one optimizer step on the batch mean of :math:`\hat L`
    (``eqx.filter_value_and_grad`` inside one ``eqx.filter_jit`` step, compiled once per
    architecture, data shape, batch size and optimizer: repeated calls with the default Adam of
    the same learning rate reuse it).

    :param key: PRNG key of the batches and masks.
    :param network: an ``equinox.Module`` network with ``num_positions`` and ``num_categories``
        (e.g. :class:`~numpyro_autospec.learned.MaskedMLP`); its inexact arrays are trained.
    :param data: concrete ``int[N, n]`` training configurations with values in ``[0, q)``.
    :param num_steps: optimizer steps (``>= 1``).
    :param batch_size: examples per step.
    :param learning_rate: Adam's step size (ignored when ``optimizer`` is given).
    :param optimizer: any ``optax.GradientTransformation`` instead of ``optax.adam``.
    :return: ``(trained network, losses)``, ``losses`` float64 numpy ``[num_steps]``: the
        batch objective (nats per configuration) at each step, before its update.
    :raises AutospecError: for data of the wrong shape, dtype or range, or bad step settings.

    >>> import jax, numpy as np
    >>> from numpyro_autospec.learned import MaskedMLP
    >>> data = np.array([[0, 0, 0], [1, 1, 1]] * 8)
    >>> network = MaskedMLP(3, 2, hidden_size=8, key=jax.random.PRNGKey(0))
    >>> network, losses = fit(jax.random.PRNGKey(1), network, data, num_steps=100,
    ...                       batch_size=16, learning_rate=3e-2)
    >>> losses.shape, bool(losses[-20:].mean() < 0.5 * losses[:20].mean())
    ((100,), True)
    """
    n, q = network_sizes(network, "fit")
    data = check_training_data(data, n, q)
    num_steps = positive_integer(num_steps, "fit: num_steps", ConfigError)
    batch_size = positive_integer(batch_size, "fit: batch_size", ConfigError)
    if optimizer is None:
        if not (math.isfinite(learning_rate) and learning_rate > 0):
            raise ConfigError(
                f"fit: learning_rate must be positive and finite, got {learning_rate}"
            )
        optimizer = _adam(float(learning_rate))
    opt_state = optimizer.init(eqx.filter(network, eqx.is_inexact_array))
    device_data = jnp.asarray(data)
    losses = []
    for index in range(num_steps):
        network, opt_state, loss = _train_step(
            network, opt_state, jax.random.fold_in(key, index), device_data, optimizer, batch_size
        )
        losses.append(loss)
    return network, np.asarray(jnp.stack(losses), np.float64)
