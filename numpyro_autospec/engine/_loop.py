"""The engine's loop (docs/algorithm.md, section 4): one ``lax.while_loop`` whose every
iteration, a *pass*, (1) resolves residual loops and frees orphans, (2) advances up to
``lanes`` slots an event reached and applies the finished trials' reports, (3) admits trials
and draws, and (4) when no slot can move, runs the round of oracle calls (trip count 0
otherwise), so everything ready at once shares a round, as in the reference."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.engine._compact import first_true
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import Meta, Pool, Scores, Status, flatten, pack, repack, unpack
from numpyro_autospec.engine._round import query_round
from numpyro_autospec.engine._tasks import Lane, advance
from numpyro_autospec.engine._trials import (
    Pending,
    admit,
    apply_reports,
    counted_children,
    next_buffer,
    orphans,
    pending,
    resolve,
)

__all__ = ["Context", "EngineState", "initial_state", "run_loop"]


class Context(NamedTuple):
    """What a run does not change."""

    process: Any
    plan: Plan
    keys: Array  # key[D]: draw d is the reference's draw with key keys[d]
    validate: bool


class EngineState(NamedTuple):
    pool: Pool
    due: Pending  # what the next pass resolves and frees
    window_rows: Any  # [D, W, ...]: the scored rows of each root's window
    rounds: Array  # int32[D]
    queries: Array  # int32[D]
    conditionals: Array  # int32[D]
    defect: Array  # int32[4]: (code, row, step, draw) of the first defective answer
    total_rounds: Array  # int32
    passes: Array  # int32
    stalled: Array  # bool


def events(meta: Meta) -> Array:
    """The slots a pass advances (a block set up, scored or done, a leaf step answered)."""
    status = meta.status
    return (
        (status == Status.START)
        | (status == Status.SCORED)
        | (status == Status.BLOCK_DONE)
        | (status == Status.FINISHED)
        | ((status == Status.LEAF) & (meta.has_answer == 1))
    )


def _answer(answers, owner, buffer):
    return jax.tree.map(lambda leaf: leaf[owner, buffer], answers)


def one_pass(context: Context, state: EngineState) -> EngineState:
    plan = context.plan
    size, draws = plan.num_slots, plan.num_draws
    pool = state.pool
    stored = unpack(Meta, pool.meta)
    meta = resolve(plan, stored, state.due)
    moving = events(meta)

    everyone = plan.lanes == size
    index = jnp.arange(size) if everyone else first_true(moving, plan.lanes)
    slot = jnp.minimum(index, size - 1)
    packed = repack(pool.meta, stored, meta)
    lane_rows = packed if everyone else packed[slot]
    lane_meta = meta if everyone else unpack(Meta, lane_rows)
    parent = jnp.clip(lane_meta.parent, 0, size - 1)
    parents = unpack(Meta, packed[parent])

    def take(tree):
        return tree if everyone else jax.tree.map(lambda leaf: leaf[slot], tree)

    lane = Lane(
        slot=slot,
        meta=lane_meta,
        scores=unpack(Scores, take(pool.scores)),
        keys=take(pool.keys),
        x=take(pool.x),
        answer=_answer(pool.answers, lane_meta.owner, lane_meta.buffer),
        next_answer=_answer(pool.answers, slot, next_buffer(lane_meta, slot)),
        parent_answer=_answer(pool.answers, parents.owner, parents.buffer),
        window_rows=jax.tree.map(
            lambda leaf: leaf[jnp.minimum(slot, draws - 1)], state.window_rows
        ),
    )
    moved = jax.vmap(lambda lane: advance(context, lane))(lane)
    active = moving[slot] & (index < size)
    new_meta = repack(lane_rows, lane_meta, moved.meta)
    if everyone:
        packed = jnp.where(active[:, None], new_meta, packed)
        scores = jnp.where(active[:, None], pack(moved.scores), pool.scores)
        x = jax.tree.map(
            lambda new, old: jnp.where(
                jnp.reshape(active, active.shape + (1,) * (old.ndim - 1)), new, old
            ),
            moved.x,
            pool.x,
        )
    else:
        target = jnp.where(active, slot, size)
        packed = packed.at[target].set(new_meta, mode="drop")
        scores = pool.scores.at[target].set(pack(moved.scores), mode="drop")
        x = jax.tree.map(lambda leaf, new: leaf.at[target].set(new, mode="drop"), pool.x, moved.x)
    pool = pool._replace(meta=packed, scores=scores, x=x)
    pool, meta = apply_reports(
        plan, pool, unpack(Meta, packed), jnp.where(active, index, size), moved
    )

    parents = unpack(Meta, pool.meta[jnp.clip(meta.parent, 0, size - 1)])
    children, below = counted_children(meta, parents)
    orphan = orphans(meta, parents)
    pool, meta, spawned = admit(context, pool, meta, children, orphan)
    due = pending(meta, children + spawned, below, orphan)
    quiet = ~jnp.any(events(meta) | due.resolved | due.exhausted | due.orphans)

    pool, window_rows, queries, conditionals, defect, units = query_round(
        context, pool, (state.window_rows, state.queries, state.conditionals), state.defect, quiet
    )
    has_demand = quiet & (units > 0)
    live_roots = (meta.status[:draws] != Status.FREE) & (meta.status[:draws] != Status.DONE)
    done = unpack(Meta, pool.meta[:draws]).status == Status.DONE
    return EngineState(
        pool=pool,
        due=due,
        window_rows=window_rows,
        rounds=state.rounds + (has_demand & live_roots),
        queries=queries,
        conditionals=conditionals,
        defect=defect,
        total_rounds=state.total_rounds + has_demand,
        passes=state.passes + 1,
        stalled=quiet & (units == 0) & ~jnp.all(done),
    )


def initial_state(context: Context) -> EngineState:
    """The roots of every draw (not yet admitted), an empty trial pool."""
    plan, process = context.plan, context.process
    size, draws = plan.num_slots, plan.num_draws
    policy = plan.policy
    key_init, key_run = jax.vmap(jax.random.split, out_axes=1)(context.keys)
    x_roots = jax.vmap(process.init)(key_init)
    x_first = jax.tree.map(lambda leaf: leaf[0], x_roots)
    answer_like = jax.eval_shape(lambda x: process.query(x, 0, plan.answer_rows), x_first)
    reduced_like = jax.eval_shape(process.reduce, x_first, 0, answer_like)

    def tile(leaf, count, lead=()):
        return jnp.zeros((count, *lead, *leaf.shape), leaf.dtype)

    x = jax.tree.map(lambda leaf: jnp.concatenate([leaf, tile(leaf[0], size - draws)]), x_roots)
    x = flatten(plan.state_layout, x, lead=1)
    answers = jax.tree.map(lambda leaf: tile(leaf, size, (2,)), answer_like)
    window_rows = jax.tree.map(lambda leaf: tile(leaf, draws, (plan.window_size,)), reduced_like)
    # NumPy fields, so that pack gives a constant
    slots = np.arange(size, dtype=np.int32)
    is_root = slots < draws
    zeros = np.zeros(size, np.int32)
    first_block = policy.first_window if policy.rule is not None else policy.recursion_block
    meta = Meta(*[zeros] * len(Meta._fields))._replace(
        draw=np.where(is_root, slots, 0).astype(np.int32),
        parent=zeros - 1,
        stop=zeros + plan.num_steps,
        max_block=zeros + policy.recursion_block,
        block_end=zeros + min(first_block, plan.num_steps),
        owner=slots,
        verifying=zeros + int(policy.rule is not None),
        window=zeros + policy.first_window,
    )
    keys = jnp.concatenate([key_run[:, None], key_run[:, None], key_run[:, None]], axis=1)
    keys = jnp.concatenate([keys, jnp.broadcast_to(keys[:1], (size - draws, *keys.shape[1:]))])
    pool = Pool(
        meta=pack(meta), scores=jnp.zeros((size, 2), jnp.float32), keys=keys, x=x, answers=answers
    )
    counter = jnp.zeros(draws, jnp.int32)
    nothing = jnp.zeros(size, bool)
    return EngineState(
        pool=pool,
        due=Pending(nothing, nothing, nothing),
        window_rows=window_rows,
        rounds=counter,
        queries=counter,
        conditionals=counter,
        defect=jnp.zeros(4, jnp.int32),
        total_rounds=jnp.array(0, jnp.int32),
        passes=jnp.array(0, jnp.int32),
        stalled=jnp.array(False),
    )


def run_loop(context: Context) -> EngineState:
    """Passes until every draw is done (or a defect, a stall or the pass limit)."""
    plan = context.plan

    def running(state: EngineState) -> Array:
        status = state.pool.meta[: plan.num_draws, 0]
        going = ~jnp.all(status == Status.DONE) & ~state.stalled & (state.defect[0] == 0)
        return going & (state.passes < plan.max_passes)

    return jax.lax.while_loop(
        running, lambda state: one_pass(context, state), initial_state(context)
    )
