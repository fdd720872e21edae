r"""Order-aware two-stream attention: the building block of :class:`TransformerOracle`.

An XLNet-style two-stream layer (Yang et al., 2019; sigma-GPT, Pannatier et al., 2024) keeps two
sequences of hidden vectors for an order given by its inverse ``ranks`` (``ranks[order[k]] =
k``):

* the **content stream** :math:`h_i`, one vector per site :math:`i` plus a learned *start*
  token :math:`h_\varnothing`; it carries the value :math:`x_i`;
* the **query stream** :math:`g_j`, one vector per requested pair (site :math:`s_j`, prefix
  length :math:`\ell_j`); it carries the site's position but never its value.

With pre-layer-norm attention :math:`A` and MLP :math:`F` (weights shared by both streams),
and a learned bias :math:`b_h(i - i')` per head on the attention score of a token at site
:math:`i` for a key at site :math:`i'` (a relative-position bias initialised as ALiBi, Press et
al. 2022, :math:`b_h(\delta) = -2^{-8(h+1)/H} |\delta|`: a locality prior that text needs),

.. math::

    h_i' &= h_i + A\big(h_i;\ \{h_\varnothing\} \cup \{h_{i'} : r_{i'} \le r_i\}\big),
    \qquad h_i'' = h_i' + F(h_i'),\\
    g_j' &= g_j + A\big(g_j;\ \{h_\varnothing\} \cup \{h_i : r_i < \ell_j\}\big),
    \qquad g_j'' = g_j' + F(g_j'),

:math:`r = ` ``ranks``.  By induction over layers, :math:`h_i` depends on :math:`x` only
through the sites of rank :math:`\le r_i` and :math:`g_j` only through the sites of rank
:math:`< \ell_j`: row :math:`j` is a function of the prefix of length :math:`\ell_j` (its values
and their order) and of the site :math:`s_j`, never of the values outside the prefix.  The start
token makes an empty prefix a valid query (every query attends at least one key).  This is what
the block form of the oracle protocol asks (docs/algorithm.md, section 2a; Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.errors import ConfigError

__all__ = ["TwoStreamLayer", "content_mask", "content_offsets", "query_mask", "query_offsets"]


def content_mask(ranks: Array) -> Array:
    r"""``bool[n + 1, n + 1]``: which content tokens each content token attends.

    Token 0 is the start token; token :math:`1 + i` is site :math:`i`.  The start token attends
    itself only; site :math:`i` attends the start token and every site :math:`i'` with
    :math:`r_{i'} \le r_i` (itself included).

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
    :math:`< \ell_j` (the prefix of length :math:`\ell_j` of the order).

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
    """One pre-layer-norm transformer layer applied to both streams with shared weights.

    :param model_size: width :math:`d` of the hidden vectors.
    :param num_heads: attention heads (``model_size`` must be a multiple).
    :param num_positions: :math:`n` (the span of the relative-position bias).
    :param mlp_ratio: the MLP's hidden width is ``mlp_ratio * model_size``.
    :param key: PRNG key for the initialisation.

    >>> import jax, jax.numpy as jnp
    >>> layer = TwoStreamLayer(8, 2, 3, key=jax.random.PRNGKey(0))
    >>> ranks, sites = jnp.array([2, 0, 1]), jnp.array([0, 1, 2, 0, 1])
    >>> content, queries = layer(jnp.ones((4, 8)), jnp.ones((5, 8)),
    ...                          content_mask(ranks), query_mask(ranks, jnp.arange(5) % 4),
    ...                          content_offsets(3), query_offsets(3, sites))
    >>> content.shape, queries.shape
    ((4, 8), (5, 8))
    """

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
        """``(K, V)``, each ``[S, H, d / H]``: the attention keys and values of the tokens
        ``keys [S, d]`` (layer-normed, projected, split into heads).  A key-value cache holds
        these (:mod:`numpyro_autospec.learned._kv_cache`)."""
        normed = jax.vmap(self.attention_norm)(keys)
        return self._heads(self.key_projection, normed), self._heads(self.value_projection, normed)

    def attend_projected(
        self, queries: Array, keys: Array, values: Array, mask: Array, offsets: Array
    ) -> Array:
        """``queries [T, d]`` updated by multi-head scaled dot-product attention over projected
        ``keys`` and ``values`` (:meth:`project_keys`, ``[S, H, d / H]``), softmax over the keys
        allowed by ``mask [T, S]`` (every row must allow one: the start token), with the
        relative-position bias of ``offsets [T, S]``, then by the MLP (both residual)."""
        q = self._heads(self.query_projection, jax.vmap(self.attention_norm)(queries))
        scores = jnp.einsum("thc,shc->hts", q, keys) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        bias = jnp.where(offsets[None] >= 0, self.position_bias[:, jnp.maximum(offsets, 0)], 0.0)
        scores = jnp.where(mask[None], scores + bias, jnp.finfo(scores.dtype).min)
        weights = jax.nn.softmax(scores, axis=-1)
        mixed = jnp.einsum("hts,shc->thc", weights, values).reshape(queries.shape[0], -1)
        hidden = queries + jax.vmap(self.output_projection)(mixed)
        return hidden + jax.vmap(self._mlp)(hidden)

    def attend(self, queries: Array, keys: Array, mask: Array, offsets: Array) -> Array:
        """``queries [T, d]`` updated by attention over ``keys [S, d]`` where ``mask [T, S]``
        (relative-position bias indices ``offsets [T, S]``), then by the MLP (both residual)."""
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
        """Both streams one layer up: ``(content [n + 1, d], queries [L, d])``; the query
        stream reads the content stream *before* this layer's update (two-stream rule)."""
        new_content = self.attend(content, content, content_attends, content_offsets)
        new_queries = self.attend(queries, content, queries_attend, query_offsets)
        return new_content, new_queries
