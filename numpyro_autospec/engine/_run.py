"""``run``: exact draws from a process with the engine (docs/algorithm.md, sections 3-4)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec import errors
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine._loop import Context, run_loop
from numpyro_autospec.engine._plan import Capacity, plan
from numpyro_autospec.engine._pool import Meta, unpack
from numpyro_autospec.engine.keys import engine_keys

__all__ = ["Samples", "run"]


class Samples(NamedTuple):
    """Draws with the cost the engine executed for each (leading axis: draw): ``rounds``
    (batched oracle calls), ``queries`` (oracle evaluations) and ``conditionals`` (rows of
    conditionals the draw used)."""

    value: Any
    rounds: Array
    queries: Array
    conditionals: Array | None = None


def run(
    process,
    keys: Array,
    config: SamplerConfig | None = None,
    capacity: Capacity | None = None,
    *,
    validate: bool = True,
) -> Samples:
    """Draw ``len(keys)`` exact samples from ``process``, sharing one task pool."""
    from numpyro_autospec.engine.scheduler import report_failure

    config = config or SamplerConfig()
    capacity = capacity or Capacity()
    keys = engine_keys(keys)
    context = Context(process, plan(process, config, capacity, keys.shape[0], keys[0]), keys, validate)
    with errors.project_errors():
        state = run_loop(context)
        draws = context.plan.num_draws
        meta = unpack(Meta, state.pool.meta[:draws])
        x = jax.tree.map(lambda leaf: leaf[:draws], state.pool.x)
        final = None
        if context.plan.final_query:
            final = jax.tree.map(
                lambda leaf: leaf[jnp.arange(draws), meta.buffer], state.pool.answers
            )[:draws] if False else jax.tree.map(
                lambda leaf: leaf[:draws][jnp.arange(draws), meta.buffer], state.pool.answers
            )
        value = jax.vmap(process.output)(x, final)
        incomplete = state.stalled | ~jnp.all(meta.status == 9)
        report_failure(process, state.defect, incomplete)
    return Samples(value, state.rounds, state.queries, state.conditionals)
