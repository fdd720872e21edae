r"""An any-subset, order-aware transformer: a learned oracle of the block form.

:class:`TransformerOracle` answers the block form of the oracle protocol (section 2a of
docs/algorithm.md; Anari et al., arXiv:2511.07869) in one forward pass,
``log_conditionals(x, ranks, sites, prefix_lengths) -> float[L, q]``, row :math:`j` being
:math:`\log p_\theta(X_{s_j} = \cdot \mid x_{\sigma(0)}, \dots, x_{\sigma(\ell_j - 1)})` for the
order :math:`\sigma` with inverse ``ranks``.  The network is a two-stream transformer
(:mod:`numpyro_autospec.learned._attention`): content tokens :math:`E_{\text{value}}[x_i] +
E_{\text{site}}[i]` and a start token, query tokens :math:`E_{\text{site}}[s_j] +
e_{\text{query}}`, and :math:`\log p_\theta = \mathrm{log\_softmax}(W\,
\mathrm{LN}(g_j^{(\text{last})}))`.  The conditionals depend on the order of the prefix
(``depends_on_order = True``); training reads all :math:`n` conditionals of one order in one
pass (:math:`s_k = \sigma(k)`, :math:`\ell_k = k`, as in sigma-GPT).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.errors import ConfigError
from numpyro_autospec.learned._attention import (
    TwoStreamLayer,
    content_mask,
    content_offsets,
    query_mask,
    query_offsets,
)
from numpyro_autospec.oracles._base import AnyOrderOracle

__all__ = ["TransformerOracle", "inverse_permutation"]


def inverse_permutation(order: Array) -> Array:
    """``ranks`` with ``ranks[order[k]] = k``."""
    order = jnp.asarray(order, jnp.int32)
    return jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=jnp.int32))


class TransformerOracle(eqx.Module, AnyOrderOracle):
    r"""A two-stream transformer over :math:`n` sites with :math:`q` values each, and an
    :class:`~numpyro_autospec.oracles.AnyOrderOracle` of the block form.

    An ``equinox.Module`` (a pytree) whose equality and hashing are by identity.

    :param num_positions: :math:`n`.
    :param num_categories: :math:`q`.
    :param model_size: width :math:`d` of the hidden vectors.
    :param num_layers: two-stream layers.
    :param num_heads: attention heads.
    :param mlp_ratio: the MLP's hidden width is ``mlp_ratio * model_size``.
    :param key: PRNG key for the initialisation.

    >>> import jax, jax.numpy as jnp
    >>> oracle = TransformerOracle(5, 3, model_size=16, num_layers=1, num_heads=2,
    ...                            key=jax.random.PRNGKey(0))
    >>> ranks = inverse_permutation(jnp.array([4, 1, 0, 2, 3]))
    >>> x = jnp.array([0, 2, 1, 1, 0])
    >>> rows = oracle.log_conditionals(x, ranks, jnp.array([4, 1, 0]), jnp.array([0, 1, 2]))
    >>> rows.shape, bool(jnp.allclose(jnp.exp(rows).sum(-1), 1.0, atol=1e-5))
    ((3, 3), True)
    >>> oracle.scores_blocks, oracle.depends_on_order
    (True, True)
    """

    value_embedding: eqx.nn.Embedding
    site_embedding: eqx.nn.Embedding
    start_token: Array
    query_token: Array
    layers: tuple[TwoStreamLayer, ...]
    output_norm: eqx.nn.LayerNorm
    readout: eqx.nn.Linear
    num_positions: int = eqx.field(static=True)
    num_categories: int = eqx.field(static=True)

    scores_blocks: ClassVar[bool] = True
    depends_on_order: ClassVar[bool] = True

    def __init__(
        self,
        num_positions: int,
        num_categories: int,
        *,
        model_size: int = 128,
        num_layers: int = 3,
        num_heads: int = 4,
        mlp_ratio: int = 4,
        key: Array,
    ) -> None:
        if num_positions < 1 or num_categories < 1 or num_layers < 1:
            raise ConfigError("need num_positions, num_categories and num_layers >= 1")
        keys = jax.random.split(key, num_layers + 5)
        self.num_positions = int(num_positions)
        self.num_categories = int(num_categories)
        self.value_embedding = eqx.nn.Embedding(num_categories, model_size, key=keys[0])
        self.site_embedding = eqx.nn.Embedding(num_positions, model_size, key=keys[1])
        self.start_token = jax.random.normal(keys[2], (model_size,))
        self.query_token = jax.random.normal(keys[3], (model_size,))
        self.layers = tuple(
            TwoStreamLayer(model_size, num_heads, num_positions, mlp_ratio, key=layer_key)
            for layer_key in keys[5:]
        )
        self.output_norm = eqx.nn.LayerNorm(model_size)
        self.readout = eqx.nn.Linear(model_size, num_categories, key=keys[4])

    # a static field of a NumPyro distribution must be hashable
    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def log_conditionals(
        self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array
    ) -> Array:
        r"""``float32[L, q]``: row :math:`j` is :math:`\log p_\theta(X_{s_j} = \cdot \mid x_i,
        r_i < \ell_j)`, all rows in one forward pass."""
        x = jnp.asarray(x, jnp.int32)
        ranks = jnp.asarray(ranks, jnp.int32)
        sites = jnp.asarray(sites, jnp.int32)
        prefix_lengths = jnp.asarray(prefix_lengths, jnp.int32)
        site_vectors = jax.vmap(self.site_embedding)(jnp.arange(self.num_positions))
        values = jax.vmap(self.value_embedding)(x) + site_vectors
        content = jnp.concatenate([self.start_token[None], values], axis=0)
        queries = site_vectors[sites] + self.query_token[None, :]
        content_attends = content_mask(ranks)
        queries_attend = query_mask(ranks, prefix_lengths)
        offsets = (content_offsets(self.num_positions), query_offsets(self.num_positions, sites))
        for layer in self.layers:
            content, queries = layer(content, queries, content_attends, queries_attend, *offsets)
        logits = jax.vmap(lambda g: self.readout(self.output_norm(g)))(queries)
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)

    def sequence_log_probs(self, x: Array, order: Array) -> Array:
        r"""``float32[n]``: :math:`\log p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)})` along
        :math:`\sigma` = ``order`` in one pass; the sum is :math:`\log p_\sigma(x)`."""
        order = jnp.asarray(order, jnp.int32)
        rows = self.log_conditionals(
            x, inverse_permutation(order), order, jnp.arange(self.num_positions)
        )
        return rows[jnp.arange(self.num_positions), jnp.asarray(x, jnp.int32)[order]]
