"""The state of a run: the read-only context shared by every function of the engine, the loop
state of the round scheduler, and the result.

The engine is written as pure functions of ``(context, state)``: :class:`Context` holds what a
run does not change (the process, the :class:`~numpyro_autospec.engine.plan.Plan`, the draw keys,
whether answers are validated, and the plan's tables as device arrays); :class:`EngineState` is
the carry of the compiled ``lax.while_loop`` (the task pool, the per-draw outputs and counters,
the root windows' verification buffers, and the first defective answer).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine.plan import Plan
from numpyro_autospec.engine.pool import Pool, empty_pool

__all__ = [
    "Samples",
    "Context",
    "EngineState",
    "make_context",
    "initial_state",
    "select",
    "block_answer",
]


class Samples(NamedTuple):
    """Draws with the cost the scheduler executed for each (leading axis: draw): ``rounds``
    (batched oracle calls), ``queries`` (oracle evaluations: a speculation query, a
    single-step query and a block-scoring call each count one) and ``conditionals`` (rows of
    conditionals the oracle returned).

    Both samplers return them: the engine (:func:`~numpyro_autospec.engine.run`) and, below,
    the sequential sampler, which takes one round per step and counts no conditionals.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> from numpyro_autospec.sequential import sequential_run
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=0.5), 4, 2)
    >>> samples = sequential_run(process, jax.random.split(jax.random.PRNGKey(0), 2))
    >>> samples._fields
    ('value', 'rounds', 'queries', 'conditionals')
    >>> samples.value.shape, samples.rounds.tolist(), samples.conditionals
    ((2, 4), [4, 4], None)
    """

    value: Any
    rounds: Array
    queries: Array
    conditionals: Array | None = None


class Context(NamedTuple):
    """What a run does not change (static, or constant arrays)."""

    process: Any
    plan: Plan
    keys: Array  # [num_draws, 2]: draw i is the reference's draw with key keys[i]
    validate: bool  # check every oracle answer (rounds.record_defect)
    depth: Array  # plan.depth: nesting levels below a block of m steps
    batch_sizes: Array  # plan.batch_sizes: trials of residual batch r
    #: shapes of ``query(x, a, plan.seq_block)``: the leading part of a speculation answer
    #: that a recursion block (at most ``seq_block`` steps) reads (:func:`block_answer`);
    #: ``None`` when that is the whole answer
    block_answer_shape: Any = None


class EngineState(NamedTuple):
    pool: Pool
    output: Any  # [num_draws, ...]
    done: Array  # bool[num_draws]
    started: Array  # bool[num_draws]
    rounds: Array  # int32[num_draws]
    queries: Array  # int32[num_draws]
    conditionals: Array  # int32[num_draws]
    rows: Any  # [num_draws, window_size, ...]: reduced target answers of each draw's root window
    defect: Array  # int32[4]: (code, row, step, draw) of the first defective answer; code 0: none
    next_draw: Array  # int32
    total_rounds: Array  # int32
    stalled: Array  # bool


def select(condition, new, old):
    """``new`` where ``condition``, else ``old``, leaf by leaf; a leaf that ``new`` shares
    with ``old`` (the same traced array) is returned as it is, so that a transition which
    leaves a field alone keeps it identical and :func:`~numpyro_autospec.engine.transitions.phase`
    does not write it back (an answer field holds ``n x q`` rows per slot)."""
    return jax.tree.map(lambda a, b: a if a is b else jnp.where(condition, a, b), new, old)


def make_context(process, plan: Plan, keys: Array, validate: bool = True) -> Context:
    block_rows = plan.block_answer_rows
    block_answer_shape = None
    if block_rows < plan.answer_rows:  # only then is a recursion block's answer a part
        x_like = jax.eval_shape(process.init, keys[0])
        block_answer_shape = jax.eval_shape(lambda x: process.query(x, 0, block_rows), x_like)
    return Context(
        process=process,
        plan=plan,
        keys=keys,
        validate=validate,
        depth=jnp.asarray(plan.depth),
        batch_sizes=jnp.asarray(plan.batch_sizes),
        block_answer_shape=block_answer_shape,
    )


def block_answer(context: Context, answer):
    """The part of a speculation answer ``query(x, a, R)`` that a recursion block reads: the
    leading part of each leaf, of the shape of ``query(x, a, seq_block)`` (the process
    contract: an answer of fewer rows is the leading part of one of more,
    :mod:`numpyro_autospec.processes.base`).  Any-order answers keep their first
    ``recursion_block`` rows of ``max_window``, so the speculation of a block of 2 steps deep in
    a residual loop no longer draws and scores ``max_window`` rows (4096 at ``n = 4096``);
    diffusion answers, and any-order answers when recursion blocks are as long as the answers,
    are kept whole (no shape is traced for them).  The rows a block uses are the same, so are
    the draws."""
    if context.block_answer_shape is None:
        return answer
    return jax.tree.map(
        lambda leaf, like: leaf[tuple(slice(0, size) for size in like.shape)],
        answer,
        context.block_answer_shape,
    )


def initial_state(context: Context) -> EngineState:
    """An empty pool, no draw started."""
    plan, process = context.plan, context.process
    key_like = context.keys[0]

    def zeros_like(tree):
        return jax.tree.map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), tree)

    x_like = zeros_like(jax.eval_shape(process.init, key_like))
    answer_like = zeros_like(
        jax.eval_shape(lambda x: process.query(x, 0, plan.answer_rows), x_like)
    )
    reduced_like = jax.eval_shape(process.reduce, x_like, 0, answer_like)
    num_draws = plan.num_draws
    rows = jax.tree.map(
        lambda leaf: jnp.zeros((num_draws, plan.window_size) + leaf.shape, leaf.dtype),
        reduced_like,
    )
    output_like = jax.eval_shape(process.output, x_like, answer_like if plan.final_query else None)
    counter = jnp.zeros(num_draws, jnp.int32)
    return EngineState(
        pool=empty_pool(
            plan.num_slots, key_like, x_like, answer_like, block_answer(context, answer_like)
        ),
        output=jax.tree.map(
            lambda leaf: jnp.zeros((num_draws,) + leaf.shape, leaf.dtype), output_like
        ),
        done=jnp.zeros(num_draws, bool),
        started=jnp.zeros(num_draws, bool),
        rounds=counter,
        queries=counter,
        conditionals=counter,
        rows=rows,
        defect=jnp.zeros(4, jnp.int32),
        next_draw=jnp.array(0, jnp.int32),
        total_rounds=jnp.array(0, jnp.int32),
        stalled=jnp.array(False),
    )
