r"""A masked multilayer perceptron that answers any-order queries (BERT/MADE-style).

One forward pass maps a partial assignment to the conditionals of every site.  With
:math:`S` the pinned sites (``mask``), :math:`m \in \{0, 1\}^n` its indicator and
:math:`e(v) \in \{0, 1\}^q` the one-hot vector of a value,

.. math::

    h_0 &= \big[\, m_1 e(x_1), \dots, m_n e(x_n),\; m \,\big] \in \mathbb{R}^{nq + n},
    \qquad h_{l+1} = \phi(W_l h_l + b_l), \quad l = 0, \dots, L - 1,\\
    \log p(X_i = v \mid x_S) &= z_{iv} - \log \sum_{w} e^{z_{iw}},
    \qquad z = \operatorname{reshape}_{n \times q}(W_L h_L + b_L).

The answer depends on :math:`x` only through :math:`x_S` (the any-order ARM of Uria et al.,
2014, and Hoogeboom et al., 2022).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.errors import ConfigError, positive_integer

__all__ = ["MaskedMLP", "masked_inputs", "mlp_forward", "mlp_layers"]


def masked_inputs(x: Array, mask: Array, num_categories: int) -> Array:
    r"""The network input :math:`h_0 = [\operatorname{vec}(m \odot e(x)), m]`, float32."""
    mask = jnp.asarray(mask, bool)
    one_hot = jax.nn.one_hot(jnp.asarray(x), num_categories, dtype=jnp.float32)
    pinned = jnp.where(mask[:, None], one_hot, 0.0)
    return jnp.concatenate([pinned.reshape(-1), mask.astype(jnp.float32)])


def mlp_layers(sizes: list[int], key: Array) -> list[eqx.nn.Linear]:
    """The linear layers of an MLP of widths ``sizes``; layer ``l`` gets ``split(key)[l]``."""
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        eqx.nn.Linear(fan_in, fan_out, key=layer_key)
        for fan_in, fan_out, layer_key in zip(sizes[:-1], sizes[1:], keys, strict=True)
    ]


def mlp_forward(
    layers: tuple[eqx.nn.Linear, ...], activation: Callable[[Array], Array], hidden: Array
) -> Array:
    r""":math:`W_L h_L + b_L` from :math:`h_0` = ``hidden`` (``activation`` :math:`\phi`)."""
    for layer in layers[:-1]:
        hidden = activation(layer(hidden))
    return layers[-1](hidden)


class MaskedMLP(eqx.Module):
    r"""An any-order network on :math:`[q]^n`: ``(x: int[n], mask: bool[n]) -> float[n, q]``.

    Input :math:`[m \odot e(x), m]` (module docstring), ``depth`` hidden layers, and :math:`nq`
    logits normalized per site: row :math:`i` is :math:`\log p(X_i = \cdot \mid x_S)`.  An
    ``equinox.Module`` (its weights are the leaves); wrap a trained network in
    :class:`~numpyro_autospec.learned.LearnedOracle` to sample from it.

    :param num_positions: :math:`n`, sites.
    :param num_categories: :math:`q`, values per site.
    :param hidden_size: :math:`H`, units per hidden layer.
    :param depth: :math:`L \ge 1`, hidden layers.
    :param activation: :math:`\phi`, an elementwise JAX function.
    :param key: PRNG key of the initial weights (Equinox's default initialisation).

    >>> import jax, jax.numpy as jnp
    >>> network = MaskedMLP(4, 3, hidden_size=16, key=jax.random.PRNGKey(0))
    >>> mask = jnp.array([True, False, False, True])
    >>> answer = network(jnp.array([2, 0, 1, 1]), mask)
    >>> answer.shape, bool(jnp.allclose(jax.nn.logsumexp(answer, axis=-1), 0.0, atol=1e-6))
    ((4, 3), True)
    >>> other = network(jnp.array([2, 1, 0, 1]), mask)  # same pinned values, other free ones
    >>> bool(jnp.all(answer == other))
    True
    """

    layers: tuple[eqx.nn.Linear, ...]
    num_positions: int = eqx.field(static=True)
    num_categories: int = eqx.field(static=True)
    activation: Callable[[Array], Array] = eqx.field(static=True)

    def __init__(
        self,
        num_positions: int,
        num_categories: int,
        hidden_size: int = 64,
        depth: int = 2,
        activation: Callable[[Array], Array] = jax.nn.gelu,
        *,
        key: Array,
    ) -> None:
        n, q, hidden_size, depth = (
            positive_integer(value, f"MaskedMLP: {label}", ConfigError)
            for label, value in (
                ("num_positions", num_positions),
                ("num_categories", num_categories),
                ("hidden_size", hidden_size),
                ("depth", depth),
            )
        )
        self.layers = tuple(mlp_layers([n * q + n] + [hidden_size] * depth + [n * q], key))
        self.num_positions = n
        self.num_categories = q
        self.activation = activation

    def logits(self, x: Array, mask: Array) -> Array:
        """Unnormalized logits :math:`z`, ``float32[n, q]`` (before the log-softmax)."""
        n, q = self.num_positions, self.num_categories
        if jnp.shape(x) != (n,) or jnp.shape(mask) != (n,):
            raise ConfigError(
                f"MaskedMLP: x and mask must have shape ({n},) (one query; vmap for a batch), "
                f"got {jnp.shape(x)} and {jnp.shape(mask)}"
            )
        return mlp_forward(self.layers, self.activation, masked_inputs(x, mask, q)).reshape(n, q)

    def __call__(self, x: Array, mask: Array) -> Array:
        r"""Log conditionals ``float32[n, q]``, each row normalized."""
        return jax.nn.log_softmax(self.logits(x, mask), axis=-1)
