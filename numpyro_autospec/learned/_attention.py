r"""Order-aware two-stream attention (XLNet, Yang et al. 2019; sigma-GPT, Pannatier et al. 2024).

For an order with inverse ``ranks`` :math:`r` (``ranks[order[k]] = k``) a layer keeps the
**content stream** :math:`h_i` (one vector per site, carrying :math:`x_i`, plus a learned start
token :math:`h_\varnothing`) and the **query stream** :math:`g_j` (one vector per requested
pair (site :math:`s_j`, prefix length :math:`\ell_j`), never carrying :math:`x_{s_j}`).  With
pre-layer-norm attention :math:`A` and MLP :math:`F` shared by both streams, and a learned
relative-position bias per head (initialised as ALiBi, :math:`b_h(\delta) = -2^{-8(h+1)/H}
|\delta|`),

.. math::

    h_i' &= h_i + A\big(h_i;\ \{h_\varnothing\} \cup \{h_{i'} : r_{i'} \le r_i\}\big),
    \qquad h_i'' = h_i' + F(h_i'),\\
    g_j' &= g_j + A\big(g_j;\ \{h_\varnothing\} \cup \{h_i : r_i < \ell_j\}\big),
    \qquad g_j'' = g_j' + F(g_j').

By induction over layers, row :math:`j` depends on :math:`x` only through the prefix of length
:math:`\ell_j`: the block form of the oracle protocol (section 2a of docs/algorithm.md; Anari et
al., arXiv:2511.07869).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.errors import ConfigError

__all__ = ["TwoStreamLayer", "content_mask", "content_offsets", "query_mask", "query_offsets"]


def content_mask(ranks: Array) -> Array:
    r"""``bool[n + 1, n + 1]``: token 0 (start) attends itself; token :math:`1 + i` attends the
    start token and the sites of rank :math:`\le r_i`.

    >>> import jax.numpy as jnp
    >>> content_mask(jnp.array([1, 0])).astype(int).tolist()
    [[1, 0, 0], [1, 1, 1], [1, 0, 1]]
    """
    ranks = jnp.asarray(ranks, jnp.int32)
    sites = ranks[None, :] <= ranks[:, None]
    start_row = jnp.zeros((1, ranks.shape[0]), bool)
    body = jnp.concatenate([start_row, sites], axis=0)
    start_column = jnp.ones((ranks.shape[0] + 1, 1), bool)
    return jnp.concatenate([start_column, body], axis=1)


def query_mask(ranks: Array, prefix_lengths: Array) -> Array:
    r"""``bool[L, n + 1]``: query :math:`j` attends the start token and the sites of rank
    :math:`< \ell_j`.

    >>> import jax.numpy as jnp
    >>> query_mask(jnp.array([1, 0]), jnp.array([0, 1, 2])).astype(int).tolist()
    [[1, 0, 0], [1, 0, 1], [1, 1, 1]]
    """
    ranks = jnp.asarray(ranks, jnp.int32)
    lengths = jnp.asarray(prefix_lengths, jnp.int32)
    sites = ranks[None, :] < lengths[:, None]
    return jnp.concatenate([jnp.ones((lengths.shape[0], 1), bool), sites], axis=1)


def content_offsets(num_positions: int) -> Array:
    """``int32[n + 1, n + 1]``: the index ``i - i' + n - 1`` of the relative-position bias of
    content token ``1 + i`` for key ``1 + i'``; ``-1`` where the start token is involved."""
    sites = jnp.arange(num_positions)
    body = sites[:, None] - sites[None, :] + num_positions - 1
    return jnp.pad(body, ((1, 0), (1, 0)), constant_values=-1).astype(jnp.int32)


def query_offsets(num_positions: int, sites: Array) -> Array:
    """``int32[L, n + 1]``: the bias index ``s_j - i' + n - 1`` of query ``j`` for key
    ``1 + i'``; ``-1`` for the start token."""
    body = jnp.asarray(sites, jnp.int32)[:, None] - jnp.arange(num_positions)[None, :]
    return jnp.pad(body + num_positions - 1, ((0, 0), (1, 0)), constant_values=-1)


class TwoStreamLayer(eqx.Module):
    """One pre-layer-norm transformer layer applied to both streams with shared weights
    (``model_size`` :math:`d` a multiple of ``num_heads``; MLP width ``mlp_ratio * d``)."""

    query_projection: eqx.nn.Linear
    key_projection: eqx.nn.Linear
    value_projection: eqx.nn.Linear
    output_projection: eqx.nn.Linear
    attention_norm: eqx.nn.LayerNorm
    mlp_norm: eqx.nn.LayerNorm
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear
    position_bias: Array
    num_heads: int = eqx.field(static=True)

    def __init__(
        self, model_size: int, num_heads: int, num_positions: int, mlp_ratio: int = 4, *, key: Array
    ):
        if model_size % num_heads:
            raise ConfigError(f"model_size {model_size} is not a multiple of num_heads {num_heads}")
        keys = jax.random.split(key, 6)
        self.num_heads = int(num_heads)
        slopes = 2.0 ** (-8.0 * jnp.arange(1, num_heads + 1) / num_heads)
        distances = jnp.abs(jnp.arange(2 * num_positions - 1) - (num_positions - 1))
        self.position_bias = -slopes[:, None] * distances[None, :]
        self.query_projection = eqx.nn.Linear(model_size, model_size, use_bias=False, key=keys[0])
        self.key_projection = eqx.nn.Linear(model_size, model_size, use_bias=False, key=keys[1])
        self.value_projection = eqx.nn.Linear(model_size, model_size, use_bias=False, key=keys[2])
        self.output_projection = eqx.nn.Linear(model_size, model_size, key=keys[3])
        self.attention_norm = eqx.nn.LayerNorm(model_size)
        self.mlp_norm = eqx.nn.LayerNorm(model_size)
        self.mlp_in = eqx.nn.Linear(model_size, mlp_ratio * model_size, key=keys[4])
        self.mlp_out = eqx.nn.Linear(mlp_ratio * model_size, model_size, key=keys[5])

    def _mlp(self, hidden: Array) -> Array:
        return self.mlp_out(jax.nn.gelu(self.mlp_in(self.mlp_norm(hidden))))

    def _heads(self, projection: eqx.nn.Linear, tokens: Array) -> Array:
        """``tokens [T, d]`` projected and split into heads: ``[T, H, d / H]``."""
        projected = jax.vmap(projection)(tokens)
        return projected.reshape(tokens.shape[0], self.num_heads, -1)

    def project_keys(self, keys: Array) -> tuple[Array, Array]:
        """``(K, V)``, each ``[S, H, d / H]``: the projected keys and values of ``keys [S, d]``
        (what the key-value cache holds)."""
        normed = jax.vmap(self.attention_norm)(keys)
        return self._heads(self.key_projection, normed), self._heads(self.value_projection, normed)

    def attend_projected(
        self, queries: Array, keys: Array, values: Array, mask: Array, offsets: Array
    ) -> Array:
        """``queries [T, d]`` updated by attention over projected ``keys``, ``values``
        (:meth:`project_keys`) where ``mask [T, S]``, bias indices ``offsets [T, S]``, then by
        the MLP (both residual)."""
        q = self._heads(self.query_projection, jax.vmap(self.attention_norm)(queries))
        scores = jnp.einsum("thc,shc->hts", q, keys) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        bias = jnp.where(offsets[None] >= 0, self.position_bias[:, jnp.maximum(offsets, 0)], 0.0)
        scores = jnp.where(mask[None], scores + bias, jnp.finfo(scores.dtype).min)
        weights = jax.nn.softmax(scores, axis=-1)
        mixed = jnp.einsum("hts,shc->thc", weights, values).reshape(queries.shape[0], -1)
        hidden = queries + jax.vmap(self.output_projection)(mixed)
        return hidden + jax.vmap(self._mlp)(hidden)

    def attend(self, queries: Array, keys: Array, mask: Array, offsets: Array) -> Array:
        """:meth:`attend_projected` with unprojected ``keys [S, d]``."""
        return self.attend_projected(queries, *self.project_keys(keys), mask, offsets)

    def __call__(
        self,
        content: Array,
        queries: Array,
        content_attends: Array,
        queries_attend: Array,
        content_offsets: Array,
        query_offsets: Array,
    ) -> tuple[Array, Array]:
        """Both streams one layer up; the queries read the content *before* this update."""
        new_content = self.attend(content, content, content_attends, content_offsets)
        new_queries = self.attend(queries, content, queries_attend, query_offsets)
        return new_content, new_queries
