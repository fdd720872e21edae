"""One round: every ready query of every task of every draw in one batched oracle call.

A round's queries are of four shapes, each batched on its own (in parallel: one round):

* **speculation queries** ``query(x, k, R)``: ``O_a`` of a block, or the lookahead after a block
  (:func:`speculation_round`);
* **single-step queries** ``query(x, k, 1)``: leaf steps, the final query, and the scoring steps
  of a block when the process does not score blocks (:func:`step_round`);
* **block-scoring calls** ``score_block(x, a + 1, L)``: every scoring step of a block at once
  (:func:`block_round`);
* **enumerations**: the :math:`q^{m-1}` scoring calls of a rejected block whose residual is
  drawn by enumeration (:func:`enumeration_round`, :mod:`numpyro_autospec.enumeration`).

Each shape runs in the smallest of a few bucket sizes that holds its demand (:func:`bucketed`);
with a mesh (``Capacity(mesh=...)``) each shape's oracle batch is split over its devices
(:func:`~numpyro_autospec.engine.sharding.sharded_batch`), the rest of the round replicated.
Queries and conditionals are counted per draw as they are executed (:func:`count`), and every
answer is checked when the run validates (:func:`record_defect`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.defects import nonfinite_defect
from numpyro_autospec.engine.plan import has_batched_forms
from numpyro_autospec.engine.pool import Pool, Status, expand_demand, gather, scatter
from numpyro_autospec.engine.sharding import sharded_batch
from numpyro_autospec.engine.state import Context, EngineState, block_answer
from numpyro_autospec.engine.transitions import wants_lookahead
from numpyro_autospec.engine.windows import write_window_rows
from numpyro_autospec.enumeration import sample_residual

__all__ = [
    "speculation_demand",
    "step_demand",
    "block_demand",
    "speculation_round",
    "step_round",
    "block_round",
    "enumeration_round",
    "bucketed",
    "query_round",
]


def speculation_demand(context: Context, pool: Pool) -> Array:
    """Slots that need ``O_a`` or a lookahead."""
    lookahead = (
        (pool.status == Status.SCORING)
        & wants_lookahead(context.plan, pool.block_end)
        & ~pool.has_next
    )
    return (pool.status == Status.NEED_ANSWER) | lookahead


def step_demand(context: Context, pool: Pool) -> Array:
    """Single-step queries each slot needs."""
    status = pool.status
    single = ((status == Status.LEAF) & ~pool.has_answer) | (status == Status.NEED_FINAL)
    if context.plan.block_scoring:
        return single.astype(jnp.int32)
    scoring = jnp.where(
        status == Status.SCORING, jnp.maximum(pool.block_end - pool.score_next, 0), 0
    )
    return jnp.where(single, 1, scoring)


def block_demand(context: Context, pool: Pool) -> Array:
    """Slots that need a block-scoring call."""
    if not context.plan.block_scoring:
        return jnp.zeros(pool.status.shape, bool)
    return (pool.status == Status.SCORING) & (pool.score_next < pool.block_end)


def record_defect(context: Context, state, valid, x, step, answers, slot, pool) -> Array:
    """The first defective answer of a batch, if none was recorded before.  ``x is None``
    (answers read in place, without the queries' states): the generic NaN/infinity check."""
    if not context.validate:
        return state.defect
    if x is None:
        codes, rows_hit = jax.vmap(nonfinite_defect)(answers)
    else:
        codes, rows_hit = jax.vmap(context.process.answer_defect)(x, step, answers)
    return keep_first_defect(state, valid & (codes > 0), codes, rows_hit, step, pool.draw[slot])


def keep_first_defect(state, bad, codes, rows_hit, step, draw) -> Array:
    """The record ``(code, row, step, draw)`` of the first ``bad`` lane of a batch, unless a
    defect was recorded before."""
    first = jnp.argmax(bad)
    record = jnp.stack([codes[first], rows_hit[first], step[first], draw[first]])
    return jnp.where(jnp.any(bad) & (state.defect[0] == 0), record, state.defect)


def count(context: Context, state: EngineState, valid, slot, rows, evaluations=None) -> EngineState:
    """Add the batch's queries (one per valid lane, or ``evaluations`` per lane) and
    conditionals (``rows`` per lane) to the per-draw counters."""
    num_draws = context.plan.num_draws
    draw = jnp.where(valid, state.pool.draw[slot], num_draws)
    per_lane = valid.astype(jnp.int32) if evaluations is None else jnp.where(valid, evaluations, 0)
    queries = jax.ops.segment_sum(per_lane.astype(jnp.int32), draw, num_draws + 1)
    conditionals = jax.ops.segment_sum(
        jnp.where(valid, rows, 0).astype(jnp.int32), draw, num_draws + 1
    )
    return state._replace(
        queries=state.queries + queries[:num_draws],
        conditionals=state.conditionals + conditionals[:num_draws],
    )


def pad_rows(tree, like):
    """Pad the row axis (axis 1, after the batch axis) of every leaf of ``tree`` with zeros to
    the shape of ``like`` (single-step answers stored in speculation-answer fields)."""

    def pad(leaf, shape):
        widths = [(0, t - c) for c, t in zip(leaf.shape[1:], shape.shape, strict=True)]
        return leaf if leaf.shape[1:] == shape.shape else jnp.pad(leaf, [(0, 0), *widths])

    return jax.tree.map(pad, tree, like)


def speculation_round(context: Context, state: EngineState, lanes: int) -> EngineState:
    """``query(x, k, R)`` for every slot that needs ``O_a`` or a lookahead."""
    plan, process = context.plan, context.process
    num_slots, answer_rows = plan.num_slots, plan.answer_rows
    pool = state.pool
    (slot,) = jnp.nonzero(speculation_demand(context, pool), size=lanes, fill_value=num_slots)
    valid = slot < num_slots
    slot = jnp.minimum(slot, num_slots - 1)
    need_answer = valid & (pool.status[slot] == Status.NEED_ANSWER)
    lookahead = valid & ~need_answer
    step = jnp.where(need_answer, pool.cursor[slot], pool.block_end[slot])
    x = gather(pool.x, slot)
    answers = sharded_batch(
        plan.mesh, jax.vmap(lambda x, k: process.query(x, k, answer_rows)), x, step
    )
    defect = record_defect(context, state, valid, x, step, answers, slot, pool)
    answer_target = jnp.where(need_answer, slot, num_slots)
    next_target = jnp.where(lookahead, slot, num_slots)
    pool = pool._replace(
        answer=scatter(pool.answer, answer_target, answers),
        has_answer=pool.has_answer.at[answer_target].set(True, mode="drop"),
        status=pool.status.at[answer_target].set(Status.START, mode="drop"),
        answer_next=scatter(pool.answer_next, next_target, answers),
        has_next=pool.has_next.at[next_target].set(True, mode="drop"),
    )
    state = state._replace(pool=pool, defect=defect)
    return count(context, state, valid, slot, jnp.clip(plan.num_steps - step, 1, answer_rows))


def step_round(context: Context, state: EngineState, batch: int) -> EngineState:
    """Up to ``batch`` single-step queries ``query(x, k, 1)`` (leaf steps, final queries,
    and scoring steps when the process does not score blocks)."""
    plan, process = context.plan, context.process
    num_slots = plan.num_slots
    pool = state.pool
    # older draws first (then slot order), so that a tight query capacity delays new
    # draws rather than starving old ones
    priority = jnp.argsort(pool.draw * num_slots + jnp.arange(num_slots))
    rank, offset, valid = expand_demand(step_demand(context, pool)[priority], batch)
    slot = priority[rank]
    status = pool.status[slot]
    scoring = status == Status.SCORING
    step = jnp.where(
        scoring,
        pool.score_next[slot] + offset,
        jnp.where(status == Status.NEED_FINAL, plan.num_steps, pool.cursor[slot]),
    )
    # the batched forms index the pool directly (no per-query copy of a whole state)
    if has_batched_forms(process):
        x = None
        answers = sharded_batch(
            plan.mesh, lambda slot, step: process.query_batch(pool.x, slot, step), slot, step
        )
    else:
        x = gather(pool.x, slot)
        answers = sharded_batch(plan.mesh, jax.vmap(lambda x, k: process.query(x, k, 1)), x, step)
    defect = record_defect(context, state, valid, x, step, answers, slot, pool)

    # scoring queries: accumulate target log-densities (and rows for verification)
    in_block = valid & scoring & (step < pool.block_end[slot])
    safe_step = jnp.minimum(step, plan.num_steps - 1)
    if x is None:
        reduced, log_mu = process.score_batch(pool.x, slot, safe_step, answers)
    else:
        reduced = jax.vmap(process.reduce)(x, safe_step, answers)
        log_mu = jax.vmap(process.target_logp)(x, safe_step, reduced)
    target = jnp.where(in_block, slot, num_slots)
    log_mu_block = (
        pool.log_mu_block
        + jax.ops.segment_sum(jnp.where(in_block, log_mu, 0.0), target, num_slots + 1)[:num_slots]
    )
    rows = write_window_rows(plan, state.rows, pool, in_block, slot, step, reduced)
    taken = jax.ops.segment_sum(
        (valid & scoring).astype(jnp.int32),
        jnp.where(valid & scoring, slot, num_slots),
        num_slots + 1,
    )[:num_slots]
    single = valid & ~scoring
    answer_target = jnp.where(single, slot, num_slots)
    new_status = jnp.where(status == Status.NEED_FINAL, Status.COMPLETE, status)
    stored = pad_rows(answers, jax.tree.map(lambda leaf: leaf[0], pool.answer))
    pool = pool._replace(
        log_mu_block=log_mu_block,
        score_next=pool.score_next + taken,
        answer=scatter(pool.answer, answer_target, stored),
        has_answer=pool.has_answer.at[answer_target].set(True, mode="drop"),
        status=pool.status.at[answer_target].set(new_status, mode="drop"),
    )
    state = state._replace(pool=pool, rows=rows, defect=defect)
    return count(context, state, valid, slot, jnp.ones_like(step))


def block_round(
    context: Context, state: EngineState, lanes: int, window: bool, rows: int | None = None
) -> EngineState:
    """One ``score_block`` call per scoring block (root windows when ``window``, else
    recursion blocks): the target rows of steps ``a+1..a+m-1`` in one evaluation of ``rows``
    rows (default: ``policy.score_rows(window)``, enough for the largest block; the caller
    passes fewer when every block of the round is shorter)."""
    plan, process = context.plan, context.process
    num_slots = plan.num_slots
    length = plan.policy.score_rows(window) if rows is None else rows
    pool = state.pool
    kind = pool.verifying if window else ~pool.verifying
    (slot,) = jnp.nonzero(block_demand(context, pool) & kind, size=lanes, fill_value=num_slots)
    valid = slot < num_slots
    slot = jnp.minimum(slot, num_slots - 1)
    x = gather(pool.x, slot)
    first = pool.block_start[slot] + 1
    answers = sharded_batch(
        plan.mesh, jax.vmap(lambda x, a: process.score_block(x, a, length)), x, first
    )
    defect = record_defect(context, state, valid, x, first, answers, slot, pool)
    steps = first[:, None] + jnp.arange(length)[None, :]
    in_block = valid[:, None] & (steps < pool.block_end[slot][:, None])
    safe_steps = jnp.minimum(steps, plan.num_steps - 1)
    log_mu = jax.vmap(jax.vmap(process.target_logp, (None, 0, 0)))(x, safe_steps, answers)
    target = jnp.where(valid, slot, num_slots)
    block_log_mu = jnp.sum(jnp.where(in_block, log_mu, 0.0), axis=1)
    log_mu_block = (
        pool.log_mu_block + jax.ops.segment_sum(block_log_mu, target, num_slots + 1)[:num_slots]
    )
    rows = state.rows
    if window:
        flat = jax.tree.map(lambda leaf: leaf.reshape((-1,) + leaf.shape[2:]), answers)
        lanes_slot = jnp.repeat(slot, length)
        rows = write_window_rows(
            plan, rows, pool, in_block.reshape(-1), lanes_slot, steps.reshape(-1), flat
        )
    pool = pool._replace(
        log_mu_block=log_mu_block,
        score_next=pool.score_next.at[target].set(pool.block_end[slot], mode="drop"),
    )
    state = state._replace(pool=pool, rows=rows, defect=defect)
    used = jnp.clip(pool.block_end[slot] - first, 1, length)
    return count(context, state, valid, slot, used)


def enumeration_round(context: Context, state: EngineState, lanes: int) -> EngineState:
    """Up to ``lanes`` rejected blocks draw their residual by enumeration
    (:func:`~numpyro_autospec.enumeration.sample_residual`, the scoring calls of all their
    prefix configurations in this round) and finish; blocks beyond that wait a round."""
    plan, process = context.plan, context.process
    num_slots = plan.num_slots
    pool = state.pool
    (slot,) = jnp.nonzero(pool.status == Status.ENUMERATE, size=lanes, fill_value=num_slots)
    valid = slot < num_slots
    slot = jnp.minimum(slot, num_slots - 1)
    x = gather(pool.x, slot)
    start = pool.block_start[slot]
    length = pool.block_end[slot] - start
    answers = gather(pool.answer, slot)
    size, block_scoring = plan.policy.enumeration, plan.block_scoring

    def enumerate_block(key, x, a, m, answer):
        answer = block_answer(context, answer)
        return sample_residual(process, key, x, a, m, answer, size, block_scoring)

    result = sharded_batch(
        plan.mesh, jax.vmap(enumerate_block), pool.key_residual[slot], x, start, length, answers
    )
    defect = state.defect
    if context.validate:
        # every configuration's rows, checked against its lane's state (the configurations
        # differ in the block's values only, which no check reads)
        codes, rows_hit = jax.vmap(
            lambda x, step, rows: jax.vmap(context.process.answer_defect, (None, None, 0))(
                x, step, rows
            )
        )(x, start + 1, result.rows)  # [lanes, C]
        bad = valid[:, None] & result.valid & (codes > 0)
        configurations = bad.shape[1]
        defect = keep_first_defect(
            state,
            bad.reshape(-1),
            codes.reshape(-1),
            rows_hit.reshape(-1),
            jnp.repeat(start + 1, configurations),
            jnp.repeat(pool.draw[slot], configurations),
        )
    target = jnp.where(valid, slot, num_slots)
    pool = pool._replace(
        x=scatter(pool.x, target, result.x),
        log_mu_block=pool.log_mu_block.at[target].set(result.log_mu, mode="drop"),
        status=pool.status.at[target].set(Status.BLOCK_DONE, mode="drop"),
        cursor=pool.cursor.at[target].set(pool.block_end[slot], mode="drop"),
        has_next=pool.has_next.at[target].set(False, mode="drop"),
    )
    state = state._replace(pool=pool, defect=defect)
    return count(context, state, valid, slot, result.conditionals, result.evaluations)


def bucketed(state: EngineState, demand: Array, sizes, call) -> EngineState:
    """``call(state, size)`` in the smallest bucket size that holds ``demand``, skipped when
    ``demand`` is 0: a ``cond`` around a ``switch`` (one ``switch`` with a skipping branch was
    slower: docs/benchmarks.md, "Asking before each micro-step")."""
    choice = jnp.sum(jnp.asarray(sizes)[:-1] < demand)
    branches = [lambda state, size=size: call(state, size) for size in sizes]
    return jax.lax.cond(
        demand > 0, lambda state: jax.lax.switch(choice, branches, state), lambda s: s, state
    )


def scoring_calls(
    context: Context,
    state: EngineState,
    blocks: Array,
    window: bool,
    lane_sizes: tuple[int, ...],
    row_sizes: tuple[int, ...],
) -> EngineState:
    """The block-scoring calls of the slots ``blocks`` (all root windows or all recursion
    blocks): in the smallest of ``lane_sizes`` that holds their number, each of the smallest of
    ``row_sizes`` that holds the longest of them (``Plan.window_rows``, ``Plan.block_rows``), so
    that a window of 256 steps, or a block of 2 steps deep in a residual loop, does not pay for
    the rows of the largest block."""
    pool = state.pool
    longest = jnp.max(jnp.where(blocks, pool.block_end - pool.block_start - 1, 0))

    def call(state, lanes):
        return bucketed(
            state,
            jnp.maximum(longest, 1),
            row_sizes,
            lambda state, rows: block_round(context, state, lanes, window, rows),
        )

    return bucketed(state, jnp.sum(blocks), lane_sizes, call)


def query_round(context: Context, state: EngineState) -> EngineState:
    """The round's queries, by shape (the transitions have run); counts the round for every
    active draw when there was any demand, and marks the run stalled when there was none."""
    plan, pool = context.plan, state.pool
    speculation = jnp.sum(speculation_demand(context, pool))
    steps = jnp.sum(step_demand(context, pool))
    blocks = block_demand(context, pool)
    enumerations = jnp.sum(pool.status == Status.ENUMERATE)
    total = speculation + steps + jnp.sum(blocks) + enumerations
    active = state.started & ~state.done
    state = bucketed(
        state,
        speculation,
        plan.lane_buckets,
        lambda state, size: speculation_round(context, state, size),
    )
    state = bucketed(
        state, steps, plan.query_buckets, lambda state, size: step_round(context, state, size)
    )
    if plan.block_scoring:
        window_blocks = blocks & pool.verifying
        state = scoring_calls(
            context, state, window_blocks, True, plan.window_buckets, plan.window_rows
        )
        state = scoring_calls(
            context, state, blocks & ~window_blocks, False, plan.block_buckets, plan.block_rows
        )
    if plan.policy.enumeration:
        state = bucketed(
            state,
            enumerations,
            plan.enumeration_buckets,
            lambda state, size: enumeration_round(context, state, size),
        )
    has_demand = total > 0
    return state._replace(
        rounds=state.rounds + (active & has_demand).astype(jnp.int32),
        total_rounds=state.total_rounds + has_demand.astype(jnp.int32),
        stalled=~has_demand & ~jnp.all(state.done),
    )
