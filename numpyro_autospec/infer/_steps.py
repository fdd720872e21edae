r"""One iteration of :class:`~numpyro_autospec.infer.AutospecKernel`: a fresh exact
joint draw per chain, either one chain at a time (:func:`autospec_step`) or every chain's draws
of an oracle site in one shared engine pool (:func:`pooled_autospec_step`).
"""

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
    """State of :class:`AutospecKernel` (one exact draw per iteration).

    :ivar i: iteration counter.
    :ivar z: the current draw: ``{site: value}`` for every latent and deterministic site.
    :ivar rounds: int32, rounds of oracle calls of the current draw (summed over oracle sites;
        for a site drawn several times in a plate, the largest of its draws, which share the
        scheduler's rounds).
    :ivar queries: int32, oracle evaluations of the current draw.
    :ivar rng_key: PRNG key of the next draw.
    :ivar failure: :class:`~numpyro_autospec._core.failures.Failure`, the first failure of the draws
        so far, as data (:class:`AutospecKernel` collects it; ``None`` for the bare steps,
        which raise inside the program); rebuilding a failed state on the host raises the
        project's exception.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> zero = jnp.zeros((), jnp.int32)
    >>> state = AutospecState(zero, {"x": jnp.zeros(4, jnp.int32)}, zero, zero,
    ...                       jax.random.PRNGKey(0))
    >>> state._fields
    ('i', 'z', 'rounds', 'queries', 'rng_key', 'failure')
    """

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
    """One iteration: a fresh exact joint draw, independent of ``state.z``.

    Example: the state after one draw.

    >>> import jax, jax.numpy as jnp, numpyro
    >>> from numpyro_autospec import AnyOrderAR, SamplerConfig
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     numpyro.sample("x", AnyOrderAR(CurieWeissOracle(4, beta=1.0), 4, 2))
    >>> zero = jnp.zeros((), jnp.int32)
    >>> state = AutospecState(zero, {"x": jnp.zeros(4, jnp.int32)}, zero, zero,
    ...                       jax.random.PRNGKey(0))
    >>> state = autospec_step(state, model, (), {}, config=SamplerConfig(method="sequential"))
    >>> int(state.i), state.z["x"].shape, int(state.rounds)
    (1, (4,), 4)
    """
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
    """One iteration of a batch of chains (``chain_method="vectorized"``), every chain's draws
    of an oracle site sharing one engine pool.

    Each chain's draw equals :func:`autospec_step`'s for its key (same site keys, and the
    engine's draws do not depend on the pool they share).  The difference is how they run:
    one scheduler over ``chains x draws`` instead of one scheduler per chain vmapped, whose
    lanes would all wait for the slowest chain's control flow at every step.  It needs the
    oracle sites to be the same in every chain: no oracle site's distribution may depend on
    a latent site (``ModelInspection.oracle_parents`` all empty; :class:`AutospecKernel`
    vmaps :func:`autospec_step` otherwise).

    Three passes: the model is traced per chain (vmapped) with placeholders to learn each
    oracle site's key; each site is drawn for all chains in one :func:`numpyro_autospec.engine.run`;
    the model is traced again per chain with those values in place, forward-sampling the
    other latent sites with the same keys as :func:`autospec_step`.
    """
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
    """``step`` after ``num_warmup`` iterations; before, a no-op that only counts (no draw,
    no oracle call, the key untouched), so the draws after warmup are those of
    ``num_warmup=0``."""
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
