"""Residual trials (docs/algorithm.md, section 3): resolution, orphans, reports (the smallest
accepted index wins) and deadlock-free admission.  A task that may recurse ``d`` more levels
needs ``d`` slots; :func:`admit` keeps ``free slots >= the needs of the tasks without
children``, and always admits a waiting task's first trial (it moves one need into one slot)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core.rejection import trial_keys
from numpyro_autospec.engine._compact import expand_demand, first_true, running_sum, segment_total
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import NO_TRIAL, Meta, Pool, Status, repack, unpack
from numpyro_autospec.engine._tasks import block_key, materialized

__all__ = [
    "Pending",
    "counted_children",
    "pending",
    "resolve",
    "next_buffer",
    "apply_reports",
    "admit",
]


#: a new draw is started when the budget holds this many times the slots it needs
SLACK = 4


class Pending(NamedTuple):
    """What the next pass resolves and frees (decided at the end of a pass, for the next)."""

    resolved: Array  # bool[S]: waiting tasks whose winner is known and earlier trials done
    exhausted: Array  # bool[S]: waiting tasks whose batch is done without a winner
    orphans: Array  # bool[S]: trials whose parent resolved, moved on or was freed


#: the parent's field each field of a spawned trial starts from (the others are written)
_RENAMED = {
    "parent_epoch": "epoch",
    "start": "block_start",
    "stop": "block_end",
    "cursor": "block_start",
    "tail_rows": "next_rows",
}
INHERITED = np.array([Meta._fields.index(_RENAMED.get(field, field)) for field in Meta._fields])
#: the fields a spawned trial starts at 0
ZEROED = (
    "block_index",
    "served",
    "has_next",
    "verifying",
    "window",
    "advanced",
    "windows",
    "trial_next",
    "batch",
    "batch_end",
    "next_rows",
)


def counted_children(meta: Meta, parents: Meta) -> tuple[Array, Array]:
    """Each slot's numbers of live trials, and of those below its best accepted trial."""
    size = meta.status.shape[0]
    child = (meta.status != Status.FREE) & (meta.parent >= 0)
    below = child & (meta.trial < parents.best_trial)
    counts = segment_total(
        jnp.stack([child, below], axis=-1).astype(jnp.int32),
        jnp.where(child, meta.parent, size),
        size,
    )
    return counts[:, 0], counts[:, 1]


def orphans(meta: Meta, parents: Meta) -> Array:
    """The trials whose parent resolved, moved on or was freed."""
    has_parent = (meta.status != Status.FREE) & (meta.parent >= 0)
    stale = (parents.epoch != meta.parent_epoch) | (parents.status != Status.WAITING)
    return has_parent & stale


def pending(meta: Meta, children: Array, below: Array, orphan: Array) -> Pending:
    """The :class:`Pending` of ``meta``, given its children counts."""
    waiting = meta.status == Status.WAITING
    winner = meta.best_trial < NO_TRIAL
    resolved = waiting & winner & (below == 0)
    exhausted = waiting & ~winner & (meta.trial_next >= meta.batch_end) & (children == 0)
    return Pending(resolved, exhausted, orphan)


def resolve(plan: Plan, meta: Meta, due: Pending) -> Meta:
    """Apply ``due``: resolved tasks finish their block, exhausted ones open the next batch,
    orphans are freed."""
    sizes = jnp.asarray(plan.batch_sizes)
    next_batch = jnp.minimum(meta.batch + 1, sizes.shape[0] - 1)
    resolved, exhausted, orphan = due
    return meta._replace(
        status=jnp.where(resolved, Status.BLOCK_DONE, jnp.where(orphan, Status.FREE, meta.status)),
        cursor=jnp.where(resolved, meta.block_end, meta.cursor),
        epoch=meta.epoch + (resolved | orphan),
        batch=jnp.where(exhausted, next_batch, meta.batch),
        batch_end=jnp.where(exhausted, meta.batch_end + sizes[next_batch], meta.batch_end),
    )


def next_buffer(meta: Meta, slots: Array | None = None) -> Array:
    """The buffer that receives a slot's lookahead: the one its current answer is not in."""
    if slots is None:
        slots = jnp.arange(meta.status.shape[0])
    return jnp.where(meta.owner == slots, 1 - meta.buffer, 0)


def apply_reports(plan: Plan, pool: Pool, meta: Meta, lanes: Array, moved) -> tuple[Pool, Meta]:
    """The reports of the trials that finished (``moved``, for the slots ``lanes``): a
    parent's smallest accepted trial hands it its state, log-density and lookahead."""
    size = plan.num_slots
    reporter = moved.meta
    parent = jnp.clip(reporter.parent, 0, size - 1)
    parents = unpack(Meta, pool.meta[parent])
    valid = (
        moved.reports
        & (lanes < size)
        & (parents.status == Status.WAITING)
        & (parents.epoch == reporter.parent_epoch)
    )
    accepted = valid & moved.accepted
    best = meta.best_trial.at[jnp.where(accepted, parent, size)].min(reporter.trial, mode="drop")
    winner = accepted & (best[parent] == reporter.trial)
    target = jnp.where(winner, parent, size)
    stored = meta
    has_next = meta.has_next.at[target].set(reporter.has_answer, mode="drop")
    meta = meta._replace(best_trial=best, has_next=has_next)
    scores = pool.scores.at[target, 0].set(moved.scores.log_mu_total, mode="drop")
    x = jax.tree.map(lambda leaf, new: leaf.at[target].set(new, mode="drop"), pool.x, moved.x)
    destination = (target, next_buffer(parents, parent))
    source = (reporter.owner, reporter.buffer)
    answers = jax.tree.map(
        lambda leaf: leaf.at[destination].set(leaf[source], mode="drop"), pool.answers
    )
    rows = repack(pool.meta, stored, meta)
    return pool._replace(meta=rows, scores=scores, x=x, answers=answers), meta


def admit(context, pool: Pool, meta: Meta, children: Array, orphan: Array):
    """Spawn up to ``spawn_lanes`` trials and start draws while the pool stays deadlock-free;
    returns the pool, the meta and the number of trials each slot spawned."""
    plan = context.plan
    size, draws, lanes = plan.num_slots, plan.num_draws, plan.spawn_lanes
    depth = jnp.asarray(plan.depth)
    top = plan.depth.shape[0] - 1
    slots = jnp.arange(size)
    live = meta.status != Status.FREE
    waiting = (meta.status == Status.WAITING) & ~orphan
    length = meta.block_end - meta.block_start
    need = jnp.where(
        waiting, depth[jnp.clip(length, 0, top)], depth[jnp.clip(meta.max_block, 0, top)]
    )
    need = jnp.where(meta.status == Status.DONE, 0, need)
    free = (slots >= draws) & ~live
    idle = (slots < draws) & ~live
    demand = jnp.where(waiting, jnp.maximum(meta.batch_end - meta.trial_next, 0), 0)
    first = (demand > 0) & (children == 0)
    cost = 1 + depth[jnp.clip((length + 1) // 2, 0, top)]
    num_free = jnp.sum(free)
    budget = num_free - jnp.sum(jnp.where(live & (children == 0), need, 0))

    # first trials first, so further ones never crowd them out of the lanes
    wanted = jnp.concatenate([first.astype(jnp.int32), demand - first])
    candidate, offset, valid = expand_demand(wanted, lanes)
    is_first = candidate < size
    parent = jnp.where(is_first, candidate, candidate - size)
    offset = offset + jnp.where(is_first, 0, first[parent])
    spend = running_sum(jnp.where(valid & ~is_first, cost[parent], 0))
    admitted = valid & (is_first | (spend <= budget))
    rank = running_sum(admitted.astype(jnp.int32)) - 1
    admitted = admitted & (rank < num_free)
    destination = first_true(free, lanes)[jnp.clip(rank, 0, lanes - 1)]
    destination = jnp.where(admitted, destination, size)
    spent = jnp.sum(jnp.where(admitted & ~is_first, cost[parent], 0))

    parent_rows = pool.meta[parent]
    parents = unpack(Meta, parent_rows)
    trial = parents.trial_next + offset
    block = materialized(jax.vmap(block_key)(parents, pool.keys[parent]))
    key_residual = materialized(jax.vmap(jax.random.fold_in)(block, jnp.full_like(trial, 2)))
    key_left, key_right, key_accept = jax.vmap(trial_keys)(key_residual, trial)
    start = parents.block_start
    half = (length[parent] + 1) // 2
    inherited_rows = parent_rows[:, INHERITED]
    inherited = unpack(Meta, inherited_rows)
    child = inherited._replace(
        **dict.fromkeys(ZEROED, 0),
        status=Status.START,
        parent=parent,
        epoch=meta.epoch[jnp.minimum(destination, size - 1)] + 1,
        trial=trial,
        max_block=half,
        block_end=start + half,
        has_answer=1,
        best_trial=NO_TRIAL,
    )
    spawned = segment_total(admitted.astype(jnp.int32), jnp.where(admitted, parent, size), size)

    # new draws while the budget lasts, with room for SLACK times their need (at most every
    # trial slot: a smaller pool runs one draw at a time)
    root_cost = min(
        SLACK * int(plan.depth[plan.policy.recursion_block]), plan.num_slots - plan.num_draws
    )
    if root_cost > 0:
        starts = idle & (running_sum(idle.astype(jnp.int32)) * root_cost <= budget - spent)
    else:
        starts = idle
    stored = meta
    status = jnp.where(starts, Status.START, meta.status)
    meta = meta._replace(status=status, trial_next=meta.trial_next + spawned)
    packed = repack(pool.meta, stored, meta)
    packed = packed.at[destination].set(repack(inherited_rows, inherited, child), mode="drop")
    keys = pool.keys.at[destination].set(
        jnp.stack([key_left, key_right, key_accept], axis=1), mode="drop"
    )
    x = jax.tree.map(lambda leaf: leaf.at[destination].set(leaf[parent], mode="drop"), pool.x)
    scores = pool.scores.at[destination].set(0.0, mode="drop")
    pool = pool._replace(meta=packed, keys=keys, x=x, scores=scores)
    return pool, unpack(Meta, packed), spawned
