"""Residual trials: resolution, orphans, reports, and deadlock-free admission of trials and
draws.

A rejected recursion block ``[a, a+m)`` waits (``Status.WAITING``) for its residual loop:
batches of trials, each a task in another slot (docs/algorithm.md, section 3).  Every pass of
the transitions

1. resolves the waiting tasks that can (:func:`resolve`): a winner is known and every earlier
   trial is done, or the batch is exhausted and the next, larger batch opens;
2. frees orphans: trials whose parent resolved, moved on or was freed;
3. applies the reports of the trials that finished in the pass (:func:`apply_reports`): the
   smallest accepted index wins and hands its state, log-density and lookahead to the parent;
4. admits new trials and new draws (:func:`admit`).

Which tasks resolve and which are orphans is decided at the end of a pass, for the next
(:func:`Pending`): nothing a round does changes it.

Deadlock freedom with a finite pool: a task that may still recurse ``d`` levels needs ``d``
more slots in the worst case.  :func:`admit` keeps ``free slots >= sum of the needs of the
tasks without children``: the first trial of a waiting task is always admitted (it moves one
unit of need into one slot), while further parallel trials and new draws are admitted only
while the inequality holds afterwards.
"""

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
    """What the next pass resolves and frees (decided at the end of a pass)."""

    resolved: Array  # bool[S]: waiting tasks whose winner is known and earlier trials done
    exhausted: Array  # bool[S]: waiting tasks whose batch is done without a winner
    orphans: Array  # bool[S]: trials whose parent resolved, moved on or was freed


#: the parent's field each field of a spawned trial starts from: its draw, its parent's epoch,
#: its range (the parent's block), its answer's buffer and the rows of its lookahead; the others
#: are written (:func:`admit`)
INHERITED = np.array(
    [
        Meta._fields.index(
            {
                "parent_epoch": "epoch",
                "start": "block_start",
                "stop": "block_end",
                "cursor": "block_start",
                "tail_rows": "next_rows",
            }.get(field, field)
        )
        for field in Meta._fields
    ]
)


def counted_children(meta: Meta, parents: Meta) -> tuple[Array, Array]:
    """Each slot's numbers of live trials, and of those below its best accepted trial (one
    segment sum for both; ``parents``: each slot's parent's fields)."""
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
    """The trials whose parent (``parents``: each slot's parent's fields) resolved, moved on
    or was freed."""
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
    """Apply ``due``: resolved tasks finish their block (the winner's state is already
    theirs; their other trials become orphans), exhausted ones open the next batch, orphans
    are freed."""
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
    """The buffer of a slot that receives its lookahead: the one its current answer is not
    in (a slot whose current answer is its parent's uses its first)."""
    if slots is None:
        slots = jnp.arange(meta.status.shape[0])
    return jnp.where(meta.owner == slots, 1 - meta.buffer, 0)


def apply_reports(plan: Plan, pool: Pool, meta: Meta, lanes: Array, moved) -> tuple[Pool, Meta]:
    """The reports of the trials that finished in this pass (``moved``, the lanes' outputs for
    the slots ``lanes``, ``num_slots`` where a lane did not move): the smallest accepted index
    of a parent wins, and its state, target log-density and lookahead answer become the
    parent's."""
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
    stored, meta = (
        meta,
        meta._replace(
            best_trial=best, has_next=meta.has_next.at[target].set(reporter.has_answer, mode="drop")
        ),
    )
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
    """Spawn residual trials and start new draws while the pool stays deadlock-free (the module
    docstring): up to ``spawn_lanes`` trials per pass, in slot order, a waiting task's first
    trial always, further ones and new draws while the budget lasts.  Returns the pool, the
    meta (unpacked) and the number of trials each slot spawned."""
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
    # a further trial costs a slot and the need of its half
    cost = 1 + depth[jnp.clip((length + 1) // 2, 0, top)]
    num_free = jnp.sum(free)
    budget = num_free - jnp.sum(jnp.where(live & (children == 0), need, 0))

    # the first trials of every waiting task first (they are always admitted, so further
    # trials never crowd them out of the pass's lanes), then the further trials
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

    # the children: a trial of its parent's block, its left half first, reading the parent's
    # speculation answer (its first half's O_a)
    parent_rows = pool.meta[parent]
    parents = unpack(Meta, parent_rows)
    trial = parents.trial_next + offset
    block = materialized(jax.vmap(block_key)(parents, pool.keys[parent]))
    key_residual = materialized(jax.vmap(jax.random.fold_in)(block, jnp.full_like(trial, 2)))
    key_left, key_right, key_accept = jax.vmap(trial_keys)(key_residual, trial)
    start = parents.block_start
    half = (length[parent] + 1) // 2
    # a child's row starts as its parent's with the inherited fields moved into place
    # (INHERITED), then the rest written
    inherited_rows = parent_rows[:, INHERITED]
    inherited = unpack(Meta, inherited_rows)
    child = inherited._replace(
        status=Status.START,
        parent=parent,
        epoch=meta.epoch[jnp.minimum(destination, size - 1)] + 1,
        trial=trial,
        max_block=half,
        block_index=0,
        block_end=start + half,
        served=0,
        has_answer=1,
        has_next=0,
        verifying=0,
        window=0,
        advanced=0,
        windows=0,
        trial_next=0,
        batch=0,
        batch_end=0,
        best_trial=NO_TRIAL,
        next_rows=0,
    )
    spawned = segment_total(admitted.astype(jnp.int32), jnp.where(admitted, parent, size), size)

    # new draws, in order, while the budget left after the trials lasts: a draw needs
    # ``depth`` slots to be sure to finish, and is started with room for ``SLACK`` times that
    # (its residual batches run their trials in parallel: a draw that waits for slots takes
    # more rounds than the reference's)
    # (at most every trial slot, which the plan makes at least one draw's need: a pool
    # smaller than that runs one draw at a time)
    root_cost = min(
        SLACK * int(plan.depth[plan.policy.recursion_block]), plan.num_slots - plan.num_draws
    )
    if root_cost > 0:
        starts = idle & (running_sum(idle.astype(jnp.int32)) * root_cost <= budget - spent)
    else:
        starts = idle
    stored, meta = (
        meta,
        meta._replace(
            status=jnp.where(starts, Status.START, meta.status),
            trial_next=meta.trial_next + spawned,
        ),
    )
    packed = repack(pool.meta, stored, meta)
    packed = packed.at[destination].set(repack(inherited_rows, inherited, child), mode="drop")
    keys = pool.keys.at[destination].set(
        jnp.stack([key_left, key_right, key_accept], axis=1), mode="drop"
    )
    x = jax.tree.map(lambda leaf: leaf.at[destination].set(leaf[parent], mode="drop"), pool.x)
    scores = pool.scores.at[destination].set(0.0, mode="drop")
    pool = pool._replace(meta=packed, keys=keys, x=x, scores=scores)
    return pool, unpack(Meta, packed), spawned
