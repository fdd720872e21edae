r"""One iteration of ``AutospecKernel``: a fresh exact joint draw per chain."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core.failures import Failure
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity
from numpyro_autospec.infer._drawing import (
    Placeholders,
    draw_from_trace,
    draw_model,
    draw_sites,
    run_with,
    site_keys,
    strong,
)

__all__ = ["AutospecState", "autospec_step", "pooled_autospec_step", "skip_warmup"]


class AutospecState(NamedTuple):
    """State of ``AutospecKernel``: iteration ``i``, the draw ``z`` (latent and deterministic
    sites), its ``rounds`` (summed over oracle sites, the largest over a site's draws) and
    ``queries``, the next ``rng_key``, and the first ``failure`` as data (``None``: raise)."""

    i: Array
    z: dict
    rounds: Array
    queries: Array
    rng_key: Array
    failure: Failure | None = None


def autospec_step(
    state: AutospecState,
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    *,
    config: SamplerConfig,
    capacity: Capacity | None = None,
) -> AutospecState:
    """One iteration: a fresh exact joint draw, independent of ``state.z``."""
    rng_key, key_draw = jax.random.split(state.rng_key)
    draw = draw_model(model, key_draw, model_args, model_kwargs, config=config, capacity=capacity)
    return AutospecState(state.i + 1, draw.z, draw.rounds, draw.queries, rng_key)


def pooled_autospec_step(
    states: AutospecState,
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    *,
    config: SamplerConfig,
    capacity: Capacity | None = None,
) -> AutospecState:
    """:func:`autospec_step` for a batch of chains (same draws), every chain's draws of an
    oracle site in one engine pool; needs oracle sites that depend on no latent site."""
    split = jax.vmap(jax.random.split)(states.rng_key)
    rng_keys, draw_keys = split[:, 0], split[:, 1]
    num_chains = draw_keys.shape[0]

    def oracle_site_keys(key):
        placeholders = Placeholders()
        run_with(model, placeholders, key, model_args, model_kwargs)
        return {name: site[0] for name, site in placeholders.sites.items()}

    keys_by_site = jax.vmap(oracle_site_keys)(draw_keys)
    sites = Placeholders()  # the oracle sites' distributions (the same in every chain)
    run_with(model, sites, draw_keys[0], model_args, model_kwargs)
    values = {}
    rounds = jnp.zeros(num_chains, jnp.int32)
    queries = jnp.zeros(num_chains, jnp.int32)
    for name, (_, base, shape) in sites.sites.items():
        num_draws = math.prod(shape)
        keys = jax.vmap(lambda key, d=num_draws: site_keys(key, d))(keys_by_site[name])
        keys = jnp.reshape(keys, (num_chains * num_draws,) + keys.shape[2:])
        samples = draw_sites(config, base.make_process(name), keys, capacity)
        values[name] = jnp.reshape(samples.value, (num_chains,) + shape + base.event_shape)
        rounds = rounds + jnp.max(jnp.reshape(samples.rounds, (num_chains, num_draws)), 1)
        queries = queries + jnp.sum(jnp.reshape(samples.queries, (num_chains, num_draws)), 1)

    def finish(key, values):
        zero = jnp.zeros((), jnp.int32)
        trace, _ = run_with(
            model, lambda name, *_: (values[name], zero, zero), key, model_args, model_kwargs
        )
        return draw_from_trace(trace)

    z = jax.vmap(finish)(draw_keys, values)
    return AutospecState(states.i + 1, z, strong(rounds), strong(queries), rng_keys)


def skip_warmup(step: Callable, num_warmup: int, batched: bool = False) -> Callable:
    """``step`` after ``num_warmup`` iterations; before, a no-op that only counts (the key
    untouched, so the draws after warmup are those of ``num_warmup=0``)."""
    if num_warmup <= 0:
        return step

    def skip(state):
        zero = jnp.zeros_like(state.rounds)
        return state._replace(i=state.i + 1, rounds=zero, queries=zero)

    def maybe_step(state, model_args, model_kwargs):
        in_warmup = (state.i[0] if batched else state.i) < num_warmup
        return jax.lax.cond(
            in_warmup, skip, lambda state: step(state, model_args, model_kwargs), state
        )

    return maybe_step
