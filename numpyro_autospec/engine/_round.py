"""One round: every ready query of every task of every draw, evaluated in one loop of batched
oracle calls whose trip count follows the round's demand.

A slot that waits for the oracle asks for *items*: the scoring steps ``a+1..a+m-1`` of its
speculated block (each given its own prefix), then its speculation answer (``O_a``, a leaf
step's answer, a lookahead after the block, or a root's final query).  The items are cut into
*units*, one oracle evaluation each:

* **block mode** (a process that declares ``scores_blocks``): a unit is one block-form call
  ``score_rows(x, steps, prefixes)`` of ``unit_rows`` conditionals of one slot (the scoring
  rows, then the answer's rows; docs/algorithm.md, section 2a);
* otherwise a unit is one query ``query(x, k, R)``: a scoring step's (reduced to its row) or a
  speculation answer.

The round evaluates ``chunk`` units per call, ``ceil(U / chunk)`` calls for ``U`` units (at most
``max_units``; the rest waits for the next round), scatters the answers into the slots'
buffers, the scoring rows' log-densities into their blocks' scores, and a root window's rows
into its verification buffer.  Queries and conditionals are counted per draw as they are
executed, and every answer is checked when the run validates.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.defects import nonfinite_defect
from numpyro_autospec.engine._compact import count_at_most, running_sum
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import Meta, Pool, Status, pack, unpack
from numpyro_autospec.engine._tasks import wants_lookahead
from numpyro_autospec.engine._trials import next_buffer
from numpyro_autospec.engine.sharding import sharded_batch

__all__ = ["Demand", "demand", "query_round"]


class Demand(NamedTuple):
    """What each slot asks of the round (elementwise over slots)."""

    asks: Array  # bool: the slot waits for the oracle
    scoring: Array  # int32: scoring items (the first ones)
    items: Array  # int32: all items
    spec_at: Array  # int32: the step whose prefix the answer conditions on
    spec_rows: Array  # int32: rows the answer is used for
    destination: Array  # int32: the buffer of the slot that receives the answer
    units: Array  # int32: units still to evaluate


def demand(plan: Plan, meta: Meta) -> Demand:
    """The items and units of every slot's query (:class:`Demand`)."""
    status = meta.status
    length = meta.block_end - meta.block_start
    need_answer = status == Status.NEED_ANSWER
    leaf = (status == Status.LEAF) & (meta.has_answer == 0)
    scoring = status == Status.SCORING
    final = status == Status.NEED_FINAL
    lookahead = scoring & wants_lookahead(plan, meta.block_end)
    spec_rows = jnp.where(
        need_answer,
        length,
        jnp.where(scoring, jnp.maximum(meta.next_rows, 1), 1),
    )
    spec_at = jnp.where(
        need_answer,
        meta.block_start,
        jnp.where(leaf, meta.cursor, jnp.where(scoring, meta.block_end, plan.num_steps)),
    )
    has_spec = need_answer | leaf | final | lookahead
    spec_items = spec_rows if plan.block_mode else jnp.ones_like(spec_rows)
    score_items = jnp.where(scoring, length - 1, 0)
    items = score_items + jnp.where(has_spec, spec_items, 0)
    asks = need_answer | leaf | scoring | final
    remaining = jnp.where(asks, jnp.maximum(items - meta.served, 0), 0)
    units = -(-remaining // plan.unit_rows)
    destination = jnp.where(scoring, next_buffer(meta), meta.buffer)
    return Demand(asks, score_items, items, spec_at, spec_rows, destination, units)


class Work(NamedTuple):
    """The round's loop carry: the pool's buffers and scores, the verification rows, the
    counters and the first defect."""

    scores: Array
    answers: Any
    window_rows: Any
    queries: Array
    conditionals: Array
    defect: Array


def _locate(cumulative: Array, units: Array, index: Array) -> tuple[Array, Array]:
    """``(slot, offset)`` of the units ``index`` of slots laid end to end (``cumulative``:
    the inclusive running sums of their ``units``)."""
    slot = jnp.minimum(count_at_most(cumulative, index), cumulative.shape[0] - 1)
    return slot, (index - (cumulative[slot] - units[slot])).astype(jnp.int32)


def _evaluate_block(context, pool: Pool, meta: Meta, need: Demand, slot, first, valid):
    """Block mode: the units' rows (``[B, L, q]``) and, per row, its step, whether it is a
    scoring row, and whether it exists."""
    plan, process = context.plan, context.process
    item = first[:, None] + jnp.arange(plan.unit_rows)[None, :]
    exists = valid[:, None] & (item < need.items[slot][:, None])
    scoring = item < need.scoring[slot][:, None]
    spec_index = item - need.scoring[slot][:, None]
    step = jnp.where(
        scoring,
        meta.block_start[slot][:, None] + 1 + item,
        need.spec_at[slot][:, None] + spec_index,
    )
    prefix = jnp.where(scoring, step, need.spec_at[slot][:, None])
    step = jnp.clip(step, 0, plan.num_steps - 1)
    prefix = jnp.clip(prefix, 0, plan.num_steps)
    x = jax.tree.map(lambda leaf: leaf[slot], pool.x)
    rows = sharded_batch(plan.mesh, jax.vmap(process.score_rows), x, step, prefix)
    return x, rows, step, scoring, exists, spec_index


def query_round(context, pool: Pool, counters, defect: Array, quiet: Array):
    """When ``quiet`` (nothing can move without the oracle), evaluate the round's units in
    ``ceil(U / chunk)`` batched calls and deliver the answers (no call otherwise); returns
    ``(pool, window_rows, queries, conditionals, defect, U)``."""
    plan, process = context.plan, context.process
    size, chunk = plan.num_slots, plan.chunk
    meta = unpack(Meta, pool.meta)
    need = demand(plan, meta)
    cumulative = running_sum(need.units)
    total = jnp.where(quiet, jnp.minimum(cumulative[-1], plan.max_units), 0)
    trips = -(-total // chunk)
    window_rows, queries, conditionals = counters

    def call(index, work: Work) -> Work:
        unit = index * chunk + jnp.arange(chunk)
        valid = unit < total
        slot, offset = _locate(cumulative, need.units, unit)
        slot = jnp.where(valid, slot, 0)
        first = meta.served[slot] + offset * plan.unit_rows
        draw = meta.draw[slot]
        block_start = meta.block_start[slot]
        is_window = (slot < plan.num_draws) & (meta.verifying[slot] == 1)
        if plan.block_mode:
            x, rows, step, scoring, exists, spec_index = _evaluate_block(
                context, pool, meta, need, slot, first, valid
            )
            score_rows = exists & scoring
            log_mu = jax.vmap(jax.vmap(process.target_logp, (None, 0, 0)))(x, step, rows)
            added = jnp.sum(jnp.where(score_rows, log_mu, 0.0), axis=1)
            used = jnp.sum(exists, axis=1)
            spec = exists & ~scoring
            spec_target = (
                jnp.where(spec, slot[:, None], size),
                need.destination[slot][:, None],
                jnp.clip(spec_index, 0, plan.answer_rows - 1),
            )
            answers = jax.tree.map(
                lambda leaf, new: leaf.at[spec_target].set(new, mode="drop"), work.answers, rows
            )
            window_target = (
                jnp.where(score_rows & is_window[:, None], slot[:, None], plan.num_draws),
                jnp.clip(step - block_start[:, None], 0, plan.window_size - 1),
            )
            new_rows = rows
            found = jax.vmap(process.rows_defect)(x, step, rows, exists)
            defect_step = step[jnp.arange(chunk), found[2]]
            codes, hit = found[0], found[1]
        else:
            exists = valid & (first < need.items[slot])
            scoring = first < need.scoring[slot]
            step = jnp.where(scoring, block_start + 1 + first, need.spec_at[slot])
            step = jnp.clip(step, 0, plan.num_steps)
            safe_step = jnp.minimum(step, plan.num_steps - 1)
            if process.batched_queries:
                x = None
                answer = sharded_batch(
                    plan.mesh, lambda s, k: process.query_batch(pool.x, s, k), slot, step
                )
                reduced, log_mu = process.score_batch(pool.x, slot, safe_step, answer)
                codes, hit = jax.vmap(nonfinite_defect)(answer)
            else:
                x = jax.tree.map(lambda leaf: leaf[slot], pool.x)
                answer = sharded_batch(
                    plan.mesh,
                    jax.vmap(lambda x, k: process.query(x, k, plan.answer_rows)),
                    x,
                    step,
                )
                reduced = jax.vmap(process.reduce)(x, safe_step, answer)
                log_mu = jax.vmap(process.target_logp)(x, safe_step, reduced)
                codes, hit = jax.vmap(process.answer_defect)(x, step, answer)
            score_rows = exists & scoring
            added = jnp.where(score_rows, log_mu, 0.0)
            used = jnp.where(exists, jnp.where(scoring, 1, need.spec_rows[slot]), 0)
            spec_target = (jnp.where(exists & ~scoring, slot, size), need.destination[slot])
            answers = jax.tree.map(
                lambda leaf, new: leaf.at[spec_target].set(new, mode="drop"), work.answers, answer
            )
            window_target = (
                jnp.where(score_rows & is_window, slot, plan.num_draws),
                jnp.clip(step - block_start, 0, plan.window_size - 1),
            )
            new_rows = reduced
            codes = jnp.where(exists, codes, 0)
            defect_step = step
        window_rows_new = jax.tree.map(
            lambda leaf, new: leaf.at[window_target].set(new, mode="drop"),
            work.window_rows,
            new_rows,
        )
        scores = work.scores.at[jnp.where(valid, slot, size), 0].add(added, mode="drop")
        # a unit is one evaluation; in block mode a slot's query counts once (its first
        # unit), whatever the units its rows are cut into
        evaluated = valid & jnp.any(exists.reshape(chunk, -1), axis=1)
        if plan.block_mode:
            evaluated = evaluated & (first == 0)
        queries_new = work.queries.at[jnp.where(evaluated, draw, plan.num_draws)].add(
            1, mode="drop"
        )
        conditionals_new = work.conditionals.at[jnp.where(valid, draw, plan.num_draws)].add(
            used, mode="drop"
        )
        defect_new = work.defect
        if context.validate:
            bad = valid & (codes > 0)
            lane = jnp.argmax(bad)
            record = jnp.stack([codes[lane], hit[lane], defect_step[lane], draw[lane]])
            defect_new = jnp.where(jnp.any(bad) & (work.defect[0] == 0), record, work.defect)
        return Work(scores, answers, window_rows_new, queries_new, conditionals_new, defect_new)

    work = Work(pool.scores, pool.answers, window_rows, queries, conditionals, defect)
    work = jax.lax.fori_loop(0, trips, call, work)

    # the slots whose query is complete take their answers
    before = cumulative - need.units
    served_units = jnp.clip(total - before, 0, need.units)
    served = jnp.minimum(need.items, meta.served + served_units * plan.unit_rows)
    complete = need.asks & (trips > 0) & (served >= need.items)
    status = meta.status
    lookahead = (status == Status.SCORING) & wants_lookahead(plan, meta.block_end)
    arrived = jnp.where(
        status == Status.NEED_ANSWER,
        Status.START,
        jnp.where(
            status == Status.SCORING,
            Status.SCORED,
            jnp.where(status == Status.NEED_FINAL, Status.DONE, status),
        ),
    )
    meta = meta._replace(
        status=jnp.where(complete, arrived, status),
        served=jnp.where(complete, 0, jnp.where(trips > 0, served, meta.served)),
        has_answer=jnp.where(complete & (status != Status.SCORING), 1, meta.has_answer),
        has_next=jnp.where(complete & lookahead, 1, meta.has_next),
    )
    pool = pool._replace(meta=pack(meta), scores=work.scores, answers=work.answers)
    return pool, work.window_rows, work.queries, work.conditionals, work.defect, total
