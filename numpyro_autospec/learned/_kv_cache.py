r"""Sequential sampling of a :class:`TransformerOracle` with cached keys and values.

The baseline at its best.  Along a fixed order :math:`\sigma` the content vectors of the sites
already drawn never change, so step :math:`k` needs one query-stream row over the cached keys
and values (:math:`\log p_\theta(X_{\sigma(k)} = \cdot \mid x_{\sigma(<k)})`) and, after the
draw, one content-stream row appended to the cache: :math:`O(n d)` per layer and step instead
of a forward pass.  The keys are those of :func:`numpyro_autospec.engine.sequential_run`, so
the draws equal that sampler's, from the law of sequential sampling along a random order
(section 2a of docs/algorithm.md; Anari et al., arXiv:2511.07869).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine import Samples
from numpyro_autospec.engine._keys import engine_keys
from numpyro_autospec.errors import OracleError
from numpyro_autospec.learned._attention import content_mask, content_offsets, query_offsets
from numpyro_autospec.learned._transformer import TransformerOracle
from numpyro_autospec.processes._any_order import AnyOrderProcess

__all__ = [
    "TransformerCache",
    "append_site",
    "kv_cached_sequential_draw",
    "kv_cached_sequential_run",
    "next_conditional",
    "prefill",
]


class TransformerCache(NamedTuple):
    """Layer ``l``'s projected keys and values ``float32[num_layers, n + 1, H, d / H]`` of the
    start token (row 0) and site ``i`` (row ``1 + i``); ``filled[n + 1]`` marks the prefix."""

    keys: Array
    values: Array
    filled: Array


def prefill(
    oracle: TransformerOracle, x: Array, ranks: Array, prefix_length: Array
) -> TransformerCache:
    r"""The cache of the prefix of length ``prefix_length`` of the order with inverse ``ranks``
    (one content-stream pass; rows outside the prefix are marked unfilled)."""
    x = jnp.asarray(x, jnp.int32)
    ranks = jnp.asarray(ranks, jnp.int32)
    n = oracle.num_positions
    site_vectors = jax.vmap(oracle.site_embedding)(jnp.arange(n))
    values = jax.vmap(oracle.value_embedding)(x) + site_vectors
    content = jnp.concatenate([oracle.start_token[None], values], axis=0)
    mask, offsets = content_mask(ranks), content_offsets(n)
    layer_keys, layer_values = [], []
    for index, layer in enumerate(oracle.layers):
        keys, projected_values = layer.project_keys(content)
        layer_keys.append(keys)
        layer_values.append(projected_values)
        if index + 1 < len(oracle.layers):  # the last layer's content output is never read
            content = layer.attend_projected(content, keys, projected_values, mask, offsets)
    filled = jnp.concatenate([jnp.ones(1, bool), ranks < prefix_length])
    return TransformerCache(jnp.stack(layer_keys), jnp.stack(layer_values), filled)


def next_conditional(oracle: TransformerOracle, cache: TransformerCache, site: Array) -> Array:
    r"""``float32[q]``: :math:`\log p_\theta(X_s = \cdot \mid \text{prefix})`, one query row."""
    site = jnp.asarray(site, jnp.int32)
    offsets = query_offsets(oracle.num_positions, site[None])
    query = (oracle.site_embedding(site) + oracle.query_token)[None]
    for index, layer in enumerate(oracle.layers):
        query = layer.attend_projected(
            query, cache.keys[index], cache.values[index], cache.filled[None], offsets
        )
    logits = oracle.readout(oracle.output_norm(query[0]))
    return jax.nn.log_softmax(logits.astype(jnp.float32))


def append_site(
    oracle: TransformerOracle, cache: TransformerCache, site: Array, value: Array
) -> TransformerCache:
    r"""The cache with ``site`` (value ``value``) appended to the prefix."""
    site = jnp.asarray(site, jnp.int32)
    offsets = query_offsets(oracle.num_positions, site[None])
    filled = cache.filled.at[1 + site].set(True)
    content = oracle.value_embedding(jnp.asarray(value, jnp.int32)) + oracle.site_embedding(site)
    content = content[None]
    keys, values = cache.keys, cache.values
    for index, layer in enumerate(oracle.layers):
        new_keys, new_values = layer.project_keys(content)
        keys = keys.at[index, 1 + site].set(new_keys[0])
        values = values.at[index, 1 + site].set(new_values[0])
        if index + 1 < len(oracle.layers):
            content = layer.attend_projected(
                content, keys[index], values[index], filled[None], offsets
            )
    return TransformerCache(keys, values, filled)


def _check_process(process) -> TransformerOracle:
    if not isinstance(process, AnyOrderProcess):
        raise OracleError(
            f"kv_cached_sequential_run needs an AnyOrderProcess, got {type(process).__name__}"
        )
    if not isinstance(process.oracle, TransformerOracle):
        raise OracleError(
            f"site {process.name!r}: kv_cached_sequential_run caches the keys and values of a "
            f"TransformerOracle; the oracle is a {type(process.oracle).__name__}"
        )
    return process.oracle


def kv_cached_sequential_draw(process: AnyOrderProcess, key: Array) -> tuple[Array, Array, Array]:
    """One draw ``(value, rounds, queries)``, keyed as ``sequential_draw``; ``rounds = queries
    = 1 + N`` (the prefill and one step per free site)."""
    oracle = _check_process(process)
    num_steps, num_observed = int(process.num_steps), int(process.num_observed)
    k_init, k_run = jax.random.split(key)
    block_key = jax.random.fold_in(k_run, 0)
    state = process.init(k_init)
    cache = prefill(oracle, state.values, state.rank, num_observed)

    def step(k, carry):
        values, cache = carry
        site = state.order[num_observed + k]
        row = next_conditional(oracle, cache, site)
        value = jax.random.categorical(jax.random.fold_in(block_key, k), row).astype(jnp.int32)
        return values.at[site].set(value), append_site(oracle, cache, site, value)

    values, _ = jax.lax.fori_loop(0, num_steps, step, (state.values, cache))
    cost = jnp.asarray(num_steps + 1, jnp.int32)
    return values, cost, cost


def kv_cached_sequential_run(process: AnyOrderProcess, keys: Array) -> Samples:
    r"""Draw ``len(keys)`` samples of an :class:`~numpyro_autospec.processes.AnyOrderProcess`
    whose oracle is a :class:`TransformerOracle` by sequential sampling with cached keys and
    values; draw ``i`` equals ``sequential_run(process, keys)`` draw ``i`` up to rounding.

    :param process: ``AnyOrderProcess(transformer, n, q, ...)`` (observed sites allowed).
    :param keys: PRNG keys of shape ``[D]`` (typed) or ``[D, 2]`` (raw ``uint32``).
    :raises OracleError: if the process is not an ``AnyOrderProcess`` of a transformer.

    >>> import jax
    >>> from numpyro_autospec.learned import TransformerOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> from numpyro_autospec.engine._sequential import sequential_run
    >>> oracle = TransformerOracle(6, 3, model_size=16, num_layers=2, num_heads=2,
    ...                            key=jax.random.PRNGKey(0))
    >>> process = AnyOrderProcess(oracle, 6, 3)
    >>> keys = jax.random.split(jax.random.PRNGKey(1), 4)
    >>> cached = kv_cached_sequential_run(process, keys)
    >>> bool((cached.value == sequential_run(process, keys).value).all()), cached.rounds.tolist()
    (True, [7, 7, 7, 7])
    """
    _check_process(process)
    keys = engine_keys(keys)
    value, rounds, queries = jax.vmap(lambda key: kv_cached_sequential_draw(process, key))(keys)
    return Samples(value, rounds, queries)
