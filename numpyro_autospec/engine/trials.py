"""Residual trials and draws: cancellation, reports, resolution, and deadlock-free admission.

A rejected recursion block ``[a, a+m)`` waits (``Status.WAITING``) for its residual loop:
batches of trials, each a child task in another slot (docs/algorithm.md, section 3).  Between
rounds this module

1. cancels orphans (:func:`cancel_orphans`): tasks whose parent resolved, moved on or was freed
   (slots are linked by index plus an ``epoch`` that changes whenever a slot is freed,
   reallocated or starts a new wait);
2. takes the reports of finished trials (:func:`report_trials`): the smallest accepted trial
   index wins and hands its state to the parent;
3. resolves waiting tasks (:func:`resolve_waiting`): a winner is known and every earlier trial
   is done, or the batch is exhausted and the next (larger) batch opens;
4. admits new trials and new draws (:func:`admit`).

Deadlock freedom with a finite pool: a task that may still recurse ``d`` levels needs ``d``
more slots in the worst case.  :func:`admit` keeps ``free slots >= sum of the needs of the tasks
without children`` (the needs of the leaves of the task forest): the first trial of a waiting
task is always admitted (it moves one unit of need into one slot), while extra parallel trials
and new draws are admitted only if the inequality still holds afterwards.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine.pool import NO_TRIAL, Pool, Status, expand_demand, gather, scatter
from numpyro_autospec.engine.state import Context, EngineState, block_answer
from numpyro_autospec.rejection import trial_keys

__all__ = [
    "orphans",
    "cancel_orphans",
    "reporting",
    "report_trials",
    "resolvable",
    "resolve_waiting",
    "Candidates",
    "candidates",
    "Admission",
    "admit",
]


def _live_children(pool: Pool, num_slots: int) -> tuple[Array, Array, Array]:
    """``(live, child, live_children)``: live slots, live trials, and each slot's number of
    live trials."""
    live = pool.status != Status.FREE
    child = live & (pool.parent >= 0)
    segment = jnp.where(child, pool.parent, num_slots)
    live_children = jax.ops.segment_sum(child.astype(jnp.int32), segment, num_slots + 1)
    return live, child, live_children[:num_slots]


def orphans(pool: Pool, num_slots: int) -> Array:
    """The tasks whose parent resolved, moved on or was freed."""
    parent = jnp.clip(pool.parent, 0, num_slots - 1)
    has_parent = (pool.status != Status.FREE) & (pool.parent >= 0)
    return has_parent & (
        (pool.epoch[parent] != pool.parent_epoch) | (pool.status[parent] != Status.WAITING)
    )


def cancel_orphans(pool: Pool, num_slots: int) -> tuple[Pool, Array]:
    """Free the :func:`orphans`; returns the pool and whether any was freed."""
    orphan = orphans(pool, num_slots)
    pool = pool._replace(
        status=jnp.where(orphan, Status.FREE, pool.status),
        epoch=pool.epoch + orphan.astype(jnp.int32),
    )
    return pool, jnp.any(orphan)


def reporting(pool: Pool) -> Array:
    """Finished trials that :func:`report_trials` reports to their parents."""
    return pool.status == Status.REPORT


def report_trials(pool: Pool, num_slots: int, lanes: int) -> tuple[Pool, Array]:
    """Up to ``lanes`` finished trials tell their parent; the smallest accepted index wins (its
    state, target log-density and lookahead answer go to the parent).  The reporters are
    freed.  Returns the pool and whether any trial reported."""
    (reporter,) = jnp.nonzero(reporting(pool), size=lanes, fill_value=num_slots)
    valid = reporter < num_slots

    def report(pool):
        reports = gather(pool, jnp.minimum(reporter, num_slots - 1))
        accepted = valid & reports.report_accept
        target = jnp.where(accepted, reports.parent, num_slots)
        best = pool.best_trial.at[target].min(reports.trial, mode="drop")
        winner = accepted & (best[jnp.clip(reports.parent, 0, num_slots - 1)] == reports.trial)
        win_target = jnp.where(winner, reports.parent, num_slots)
        pool = pool._replace(best_trial=best)
        pool = pool._replace(
            x=scatter(pool.x, win_target, reports.x),
            log_mu_block=pool.log_mu_block.at[win_target].set(reports.log_mu_total, mode="drop"),
            answer_next=scatter(pool.answer_next, win_target, reports.answer),
            has_next=pool.has_next.at[win_target].set(reports.has_answer, mode="drop"),
        )
        freed = jnp.where(valid, reporter, num_slots)
        return pool._replace(
            status=pool.status.at[freed].set(Status.FREE, mode="drop"),
            epoch=pool.epoch.at[freed].add(1, mode="drop"),
        )

    pool = jax.lax.cond(jnp.any(valid), report, lambda pool: pool, pool)
    return pool, jnp.any(valid)


def resolvable(context: Context, pool: Pool) -> tuple[Array, Array]:
    """``(resolved, exhausted)``: waiting tasks whose winner is known and whose earlier trials
    are all done, and those whose batch is exhausted without a winner."""
    num_slots = context.plan.num_slots
    _, child, live_children = _live_children(pool, num_slots)
    segment = jnp.where(child, pool.parent, num_slots)
    parent = jnp.clip(pool.parent, 0, num_slots - 1)
    below = child & (pool.trial < pool.best_trial[parent])
    live_below = jax.ops.segment_sum(below.astype(jnp.int32), segment, num_slots + 1)
    live_below = live_below[:num_slots]
    waiting = pool.status == Status.WAITING
    resolved = waiting & (pool.best_trial < NO_TRIAL) & (live_below == 0)
    exhausted = (
        waiting
        & (pool.best_trial >= NO_TRIAL)
        & (pool.trial_next >= pool.batch_end)
        & (live_children == 0)
    )
    return resolved, exhausted


def resolve_waiting(context: Context, pool: Pool) -> tuple[Pool, Array]:
    """Waiting tasks whose winner is known and whose earlier trials are all done finish their
    block (the winner's state is already theirs); those whose batch is exhausted without a
    winner open the next batch (:func:`resolvable`).  Returns the pool and whether any task
    moved."""
    resolved, exhausted = resolvable(context, pool)
    next_batch = jnp.minimum(pool.batch + 1, context.batch_sizes.shape[0] - 1)
    pool = pool._replace(
        status=jnp.where(resolved, Status.BLOCK_DONE, pool.status),
        cursor=jnp.where(resolved, pool.block_end, pool.cursor),
        epoch=pool.epoch + resolved.astype(jnp.int32),
        batch=jnp.where(exhausted, next_batch, pool.batch),
        batch_end=jnp.where(
            exhausted, pool.batch_end + context.batch_sizes[next_batch], pool.batch_end
        ),
    )
    return pool, jnp.any(resolved | exhausted)


class Admission(NamedTuple):
    pool: Pool
    next_draw: Array  # int32: the next draw to start
    started: Array  # bool[num_draws]
    admitted: Array  # bool: a trial or a draw was admitted


class Candidates(NamedTuple):
    """What :func:`admit` would admit: ``2 * lanes`` trials (first trials, then further ones)
    and ``lanes`` new draws, in that order."""

    admitted: Array  # bool[3 * lanes]
    rank: Array  # int32[3 * lanes]: the admitted candidate's index among the admitted
    live: Array  # bool[num_slots]
    spawn_parent: Array  # int32[2 * lanes]
    offset: Array  # int32[2 * lanes]: trial index after the parent's ``trial_next``
    length: Array  # int32[num_slots]: each slot's block length
    root_draw: Array  # int32[lanes]


def candidates(context: Context, pool: Pool, next_draw: Array) -> Candidates:
    """The trials and draws :func:`admit` admits (the module docstring's invariant), computed
    without changing the pool."""
    plan = context.plan
    num_slots, lanes = plan.num_slots, plan.max_transitions
    depth = context.depth
    live, _, live_children = _live_children(pool, num_slots)
    waiting = pool.status == Status.WAITING
    length = pool.block_end - pool.block_start
    need = jnp.where(
        waiting,
        depth[jnp.clip(length, 0, plan.seq_block + 1)],
        depth[jnp.clip(pool.max_block, 0, plan.seq_block + 1)],
    )
    leaves = live & (live_children == 0)
    free = jnp.sum(~live)
    budget = free - jnp.sum(jnp.where(leaves, need, 0))

    # spawn candidates: first the first trial of every waiting task without children
    # (always admissible), then further trials as (parent, offset) pairs in slot order
    demand = jnp.where(waiting, jnp.maximum(pool.batch_end - pool.trial_next, 0), 0)
    wants_first = (demand > 0) & (live_children == 0)
    (first_parent,) = jnp.nonzero(wants_first, size=lanes, fill_value=num_slots)
    first_valid = first_parent < num_slots
    extra_parent, extra_offset, extra_valid = expand_demand(
        demand - wants_first.astype(jnp.int32), lanes
    )
    extra_offset = extra_offset + wants_first[extra_parent].astype(jnp.int32)
    spawn_parent = jnp.concatenate([jnp.minimum(first_parent, num_slots - 1), extra_parent])
    offset = jnp.concatenate([jnp.zeros(lanes, jnp.int32), extra_offset])
    child_need = depth[jnp.clip((length[spawn_parent] + 1) // 2, 0, plan.seq_block + 1)]
    spawn_cost = jnp.concatenate([jnp.zeros(lanes, jnp.int32), 1 + child_need[lanes:]])

    # new draws
    root_draw = next_draw + jnp.arange(lanes)
    root_valid = root_draw < plan.num_draws
    root_cost = jnp.full((lanes,), 1 + int(plan.depth[plan.seq_block]), jnp.int32)

    is_first = jnp.concatenate([first_valid, jnp.zeros(2 * lanes, bool)])
    valid = jnp.concatenate([first_valid, extra_valid, root_valid])
    cost = jnp.concatenate([spawn_cost, root_cost])
    # firsts are always admitted (they keep the invariant); others while the budget
    # lasts (spend is monotone, so extras are admitted in order: smallest trial first)
    spend = jnp.cumsum(jnp.where(valid & ~is_first, cost, 0))
    admitted = valid & (is_first | (spend <= budget))
    rank = jnp.cumsum(admitted) - 1
    admitted = admitted & (rank < free)
    return Candidates(admitted, rank, live, spawn_parent, offset, length, root_draw)


def admit(context: Context, pool: Pool, state: EngineState) -> Admission:
    """Spawn residual trials and start new draws while the pool stays deadlock-free (the module
    docstring), up to ``max_transitions`` of each kind (:func:`candidates`)."""
    plan = context.plan
    num_slots, lanes = plan.num_slots, plan.max_transitions
    admitted, rank, live, spawn_parent, offset, length, root_draw = candidates(
        context, pool, state.next_draw
    )
    (free_slots,) = jnp.nonzero(~live, size=3 * lanes, fill_value=num_slots)
    destination = jnp.where(admitted, free_slots[jnp.clip(rank, 0, 3 * lanes - 1)], num_slots)
    spawn_destination, root_destination = destination[: 2 * lanes], destination[2 * lanes :]
    spawn_ok, root_ok = admitted[: 2 * lanes], admitted[2 * lanes :]

    pool = _spawn_trials(context, pool, spawn_parent, offset, length, spawn_destination, spawn_ok)
    draw = jnp.minimum(root_draw, plan.num_draws - 1)
    pool = _start_draws(context, pool, draw, root_destination, root_ok)
    started = state.started.at[jnp.where(root_ok, draw, plan.num_draws)].set(True, mode="drop")
    return Admission(pool, state.next_draw + jnp.sum(root_ok), started, jnp.any(admitted))


def _spawn_trials(
    context: Context, pool: Pool, spawn_parent, offset, length, destination, spawn_ok
) -> Pool:
    """Trials ``trial_next + offset`` of the parents ``spawn_parent`` into ``destination``
    (skipped when none is admitted: a scatter of whole slots is not free)."""
    num_slots = context.plan.num_slots
    count = spawn_parent.shape[0]

    def spawn(pool):
        parents = gather(pool, spawn_parent)
        trial = parents.trial_next + offset
        key_left, key_right, key_accept = jax.vmap(trial_keys)(parents.key_residual, trial)
        half = (length[spawn_parent] + 1) // 2
        old_epoch = pool.epoch[jnp.minimum(destination, num_slots - 1)]
        children = parents._replace(
            status=jnp.full((count,), Status.START, jnp.int32),
            parent=spawn_parent.astype(jnp.int32),
            parent_epoch=parents.epoch,
            epoch=old_epoch + 1,
            trial=trial,
            key_first=key_left,
            key_second=key_right,
            key_accept=key_accept,
            start=parents.block_start,
            stop=parents.block_end,
            max_block=half,
            block_index=jnp.zeros((count,), jnp.int32),
            block_end=parents.block_start + half,
            cursor=parents.block_start,
            has_answer=jnp.ones((count,), bool),
            has_next=jnp.zeros((count,), bool),
            answer_parent=jax.vmap(partial(block_answer, context))(parents.answer),
            log_mu_block=jnp.zeros((count,), jnp.float32),
            log_mu_total=jnp.zeros((count,), jnp.float32),
            best_trial=jnp.full((count,), NO_TRIAL, jnp.int32),
            verifying=jnp.zeros((count,), bool),
        )
        return scatter(pool, destination, children)

    pool = jax.lax.cond(jnp.any(spawn_ok), spawn, lambda pool: pool, pool)
    spawned_per_parent = jax.ops.segment_sum(
        spawn_ok.astype(jnp.int32), jnp.where(spawn_ok, spawn_parent, num_slots), num_slots + 1
    )[:num_slots]
    return pool._replace(trial_next=pool.trial_next + spawned_per_parent)


def _start_draws(context: Context, pool: Pool, draw, destination, root_ok) -> Pool:
    """The roots of draws ``draw`` into ``destination`` (skipped when none starts)."""
    plan, policy = context.plan, context.plan.policy
    lanes = draw.shape[0]

    def start(pool):
        first_block = policy.first_window if policy.rule is not None else policy.recursion_block
        key_init, key_run = jax.vmap(jax.random.split, out_axes=1)(context.keys[draw])
        template = gather(pool, jnp.zeros((lanes,), jnp.int32))

        def init(lane):
            """The initial state of a draw that starts, the template's of a lane that does
            not: ``process.init`` (an any-order draw's random order, two sorts of ``n``
            keys) is paid once per draw, not once per lane."""
            key, ok, placeholder = lane
            return jax.lax.cond(ok, context.process.init, lambda _: placeholder, key)

        x0 = jax.lax.map(init, (key_init, root_ok, template.x))
        zeros = jnp.zeros((lanes,), jnp.int32)
        roots = template._replace(
            status=jnp.full((lanes,), Status.START, jnp.int32),
            draw=draw.astype(jnp.int32),
            parent=zeros - 1,
            parent_epoch=zeros,
            epoch=pool.epoch[jnp.minimum(destination, plan.num_slots - 1)] + 1,
            trial=zeros,
            key_first=key_run,
            start=zeros,
            stop=zeros + plan.num_steps,
            max_block=zeros + plan.seq_block,
            block_index=zeros,
            block_start=zeros,
            block_end=zeros + min(first_block, plan.num_steps),
            verifying=jnp.full((lanes,), policy.rule is not None),
            window=zeros + policy.first_window,
            advanced=zeros,
            windows=zeros,
            cursor=zeros,
            x=x0,
            has_answer=jnp.zeros((lanes,), bool),
            has_next=jnp.zeros((lanes,), bool),
            log_mu_block=jnp.zeros((lanes,), jnp.float32),
            log_mu_total=jnp.zeros((lanes,), jnp.float32),
            best_trial=jnp.full((lanes,), NO_TRIAL, jnp.int32),
        )
        return scatter(pool, destination, roots)

    return jax.lax.cond(jnp.any(root_ok), start, lambda pool: pool, pool)
