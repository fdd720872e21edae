"""``run``: exact draws from a process with the engine (docs/algorithm.md, sections 3-4)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core import failures
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine._failure import carried_failure
from numpyro_autospec.engine._keys import engine_keys
from numpyro_autospec.engine._loop import Context, run_loop
from numpyro_autospec.engine._plan import Capacity, plan
from numpyro_autospec.engine._pool import Meta, Status, unflatten, unpack

__all__ = ["Samples", "run"]


class Samples(NamedTuple):
    """Draws (``value``, leading axis: draw) with what the engine executed for each:
    ``rounds`` (batched oracle calls), ``queries`` (oracle evaluations) and ``conditionals``
    (rows of conditionals used); ``failure`` raises the run's error where the samples reach
    the host (``None`` inside the NumPyro kernel, which carries it itself).

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> from numpyro_autospec.engine._sequential import sequential_run
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=0.5), 4, 2)
    >>> samples = sequential_run(process, jax.random.split(jax.random.PRNGKey(0), 2))
    >>> samples._fields
    ('value', 'rounds', 'queries', 'conditionals', 'failure')
    >>> samples.value.shape, samples.rounds.tolist()
    ((2, 4), [4, 4])
    """

    value: Any
    rounds: Array
    queries: Array
    conditionals: Array | None = None
    failure: failures.Failure | None = None


def run(
    process,
    keys: Array,
    config: SamplerConfig | None = None,
    capacity: Capacity | None = None,
    *,
    validate: bool = True,
) -> Samples:
    """Draw ``len(keys)`` exact samples from ``process``, sharing one task pool.

    Draw ``i`` equals ``numpyro_autospec.reference.sample(process, keys[i], config).value``.
    Pure JAX: works under ``jit`` and ``vmap`` (``process``, ``config`` and ``capacity`` are
    static; the process's parameters may be traced).  With ``validate`` (default) every oracle
    answer is checked (``process.answer_defect``); the run stops at the first defect, whose
    :class:`~numpyro_autospec.errors.OracleError` is raised where the returned
    :class:`Samples` reach the host (this call when eager, else your ``jax.jit``'s output).

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> samples = run(process, jax.random.split(jax.random.PRNGKey(0), 2))
    >>> samples.value.shape, samples.rounds.shape
    ((2, 16), (2,))
    """
    config = config or SamplerConfig()
    capacity = capacity or Capacity()
    keys = engine_keys(keys)
    context = Context(
        process, plan(process, config, capacity, keys.shape[0], keys[0]), keys, validate
    )
    state = run_loop(context)
    draws = context.plan.num_draws
    meta = unpack(Meta, state.pool.meta[:draws])
    x = unflatten(context.plan.state_layout, tuple(leaf[:draws] for leaf in state.pool.x), 1)
    final = None
    if context.plan.final_query:
        final = jax.tree.map(lambda leaf: leaf[jnp.arange(draws), meta.buffer], state.pool.answers)
    value = jax.vmap(process.output)(x, final)
    incomplete = state.stalled | ~jnp.all(meta.status == Status.DONE)
    failure = carried_failure(process, state.defect, incomplete)
    if failure is not None:
        failure.check()
    return Samples(value, state.rounds, state.queries, state.conditionals, failure)
