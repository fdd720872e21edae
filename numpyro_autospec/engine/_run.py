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
    """Draws with the cost the engine executed for each (leading axis: draw): ``rounds``
    (batched oracle calls), ``queries`` (oracle evaluations: a speculation, a block's scoring
    with its lookahead, a leaf step each count one) and ``conditionals`` (rows of conditionals
    the draw used), and the run's ``failure`` (:mod:`numpyro_autospec.engine._failure`: it
    raises the run's error where the samples reach the host; ``None`` inside the NumPyro
    kernel, which carries it itself).

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

    Draw ``i`` equals ``numpyro_autospec.reference.sample(process, keys[i], config).value``;
    ``rounds[i]``, ``queries[i]`` and ``conditionals[i]`` are what the engine executed for it.
    Pure JAX: works under ``jit`` and ``vmap`` (``process``, ``config`` and ``capacity`` are
    static; the process's parameters may be traced).

    With ``validate`` (default) every oracle answer is checked inside the compiled program
    (``process.answer_defect``: for any-order oracles NaN, ``+inf`` and unnormalized rows; for
    denoisers NaN and infinities); the run stops at the first defect and its
    :class:`~numpyro_autospec.errors.OracleError` (naming the site, the row and the step) is
    raised where the returned :class:`Samples` reach the host: by this call when it runs
    eagerly, by the output of your ``jax.jit`` when it returns them.

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
