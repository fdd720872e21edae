"""One round: every ready query of every task of every draw, evaluated in one loop of batched
oracle calls whose trip count follows the round's demand.

A slot that waits for the oracle asks for *items*: the scoring steps ``a+1..a+m-1`` of its
speculated block (each given its own prefix), then its speculation answer (``O_a``, a leaf
step's answer, a lookahead after the block, or a root's final query).  The items are cut into
*units*, one oracle evaluation each:

* **block mode** (a process that declares ``scores_blocks``): the scoring rows of a slot are
  cut into block-form calls ``score_rows(x, steps, prefixes)`` of ``unit_rows`` conditionals
  each (docs/algorithm.md, section 2a), and its answer is one more unit, a query
  ``query(x, k, R)``: the ``R`` rows of an answer share one prefix, which the oracle's
  speculation form computes at the cost of one row where rows cost a pass each (Curie-Weiss:
  ``O(n)`` for the answer, against ``O(n R)`` as ``R`` block-form rows);
* otherwise a unit is one query ``query(x, k, R)``: a scoring step's (reduced to its row) or a
  speculation answer.

The round evaluates ``chunk`` units per call (in block mode ``chunk`` scoring units and
``chunk`` answers side by side), ``ceil(U / chunk)`` calls for ``U`` units (at most
``max_units`` of each kind; the rest waits for the next round), scatters the answers into the
slots' buffers, the scoring rows' log-densities into their blocks' scores, and a root window's
rows into its verification buffer.  Queries and conditionals are counted per draw as they are
executed, and every answer is checked when the run validates.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine._compact import count_at_most, running_sum
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import Meta, Pool, Status, pack, unpack
from numpyro_autospec.engine._sharding import sharded_batch
from numpyro_autospec.engine._tasks import wants_lookahead
from numpyro_autospec.engine._trials import next_buffer
from numpyro_autospec.errors import nonfinite_defect

__all__ = ["ANSWERED", "Demand", "demand", "query_round"]

#: block mode: ``served`` counts the scoring items served, plus this once the answer is
ANSWERED = 1 << 24


class Demand(NamedTuple):
    """What each slot asks of the round (elementwise over slots)."""

    asks: Array  # bool: the slot waits for the oracle
    scoring: Array  # int32: scoring items (the first ones)
    items: Array  # int32: all items
    spec_at: Array  # int32: the step whose prefix the answer conditions on
    spec_rows: Array  # int32: rows the answer is used for
    destination: Array  # int32: the buffer of the slot that receives the answer
    units: Array  # int32: units still to evaluate (block mode: scoring units)
    has_spec: Array  # bool: the query includes an answer
    answer_units: Array  # int32: block mode: 1 while the answer is still to evaluate


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
    score_items = jnp.where(scoring, length - 1, 0)
    items = score_items + has_spec.astype(jnp.int32)
    asks = need_answer | leaf | scoring | final
    destination = jnp.where(scoring, next_buffer(meta), meta.buffer)
    if plan.block_mode:
        scored = meta.served % ANSWERED
        remaining = jnp.where(asks, jnp.maximum(score_items - scored, 0), 0)
        answer_units = (asks & has_spec & (meta.served < ANSWERED)).astype(jnp.int32)
    else:
        remaining = jnp.where(asks, jnp.maximum(items - meta.served, 0), 0)
        answer_units = jnp.zeros_like(remaining)
    units = -(-remaining // plan.unit_rows)
    return Demand(
        asks, score_items, items, spec_at, spec_rows, destination, units, has_spec, answer_units
    )


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


def _score_block(context, pool: Pool, meta: Meta, need: Demand, slot, first, valid):
    """Block mode: the scoring units' rows (``[B, L, q]``), their steps, and which exist."""
    plan, process = context.plan, context.process
    item = first[:, None] + jnp.arange(plan.unit_rows)[None, :]
    exists = valid[:, None] & (item < need.scoring[slot][:, None])
    step = jnp.clip(meta.block_start[slot][:, None] + 1 + item, 0, plan.num_steps - 1)
    x = jax.tree.map(lambda leaf: leaf[slot], pool.x)
    rows = sharded_batch(plan.mesh, jax.vmap(process.score_rows), x, step, step)
    return x, rows, step, exists


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
    if plan.block_mode:
        answer_cumulative = running_sum(need.answer_units)
        answer_total = jnp.where(quiet, jnp.minimum(answer_cumulative[-1], plan.max_units), 0)
        trips = jnp.maximum(trips, -(-answer_total // chunk))
    window_rows, queries, conditionals = counters

    def record(work: Work, valid, codes, hit, step, draw) -> Array:
        """The first defect of the run so far (codes, row, step, draw)."""
        if not context.validate:
            return work.defect
        bad = valid & (codes > 0)
        lane = jnp.argmax(bad)
        found = jnp.stack([codes[lane], hit[lane], step[lane], draw[lane]])
        return jnp.where(jnp.any(bad) & (work.defect[0] == 0), found, work.defect)

    def tally(work: Work, draw, evaluated, counted, used) -> Work:
        """One query per ``evaluated`` lane, ``used`` conditionals per ``counted`` lane, to
        their draws."""
        drop = plan.num_draws
        return work._replace(
            queries=work.queries.at[jnp.where(evaluated, draw, drop)].add(1, mode="drop"),
            conditionals=work.conditionals.at[jnp.where(counted, draw, drop)].add(
                used, mode="drop"
            ),
        )

    def deliver(work: Work, slot, exists, answer, used, evaluated, draw) -> Work:
        """Answers of ``slot`` (where ``exists``) into their destination buffers."""
        target = (jnp.where(exists, slot, size), need.destination[slot])
        answers = jax.tree.map(
            lambda leaf, new: leaf.at[target].set(new, mode="drop"), work.answers, answer
        )
        return tally(work._replace(answers=answers), draw, evaluated, exists, used)

    def score(work: Work, slot, valid, step, exists, rows, log_mu, evaluated, used) -> Work:
        """Scoring rows (``[B, L, ...]`` with their ``[B, L]`` steps) into their blocks'
        scores and, for root windows, the verification buffers."""
        draw = meta.draw[slot]
        block_start = meta.block_start[slot][:, None]
        is_window = ((slot < plan.num_draws) & (meta.verifying[slot] == 1))[:, None]
        window_target = (
            jnp.where(exists & is_window, slot[:, None], plan.num_draws),
            jnp.clip(step - block_start, 0, plan.window_size - 1),
        )
        window_rows = jax.tree.map(
            lambda leaf, new: leaf.at[window_target].set(new, mode="drop"),
            work.window_rows,
            rows,
        )
        added = jnp.sum(jnp.where(exists, log_mu, 0.0), axis=1)
        work = work._replace(
            scores=work.scores.at[jnp.where(valid, slot, size), 0].add(added, mode="drop"),
            window_rows=window_rows,
        )
        return tally(work, draw, evaluated, valid, used)

    def answer_of(slot, step):
        x = jax.tree.map(lambda leaf: leaf[slot], pool.x)
        answer = sharded_batch(
            plan.mesh, jax.vmap(lambda x, k: process.query(x, k, plan.answer_rows)), x, step
        )
        return x, answer

    def block_call(index, work: Work) -> Work:
        # scoring units: block-form calls of unit_rows rows
        unit = index * chunk + jnp.arange(chunk)
        valid = unit < total
        slot, offset = _locate(cumulative, need.units, unit)
        slot = jnp.where(valid, slot, 0)
        first = meta.served[slot] % ANSWERED + offset * plan.unit_rows
        x, rows, step, exists = _score_block(context, pool, meta, need, slot, first, valid)
        log_mu = jax.vmap(jax.vmap(process.target_logp, (None, 0, 0)))(x, step, rows)
        # a slot's scoring (with its lookahead) counts as one query: its first unit
        evaluated = valid & (first == 0) & jnp.any(exists, axis=1)
        work = score(
            work, slot, valid, step, exists, rows, log_mu, evaluated, jnp.sum(exists, axis=1)
        )
        codes, hit, row = jax.vmap(process.rows_defect)(x, step, rows, exists)
        defect_step = step[jnp.arange(chunk), row]
        work = work._replace(defect=record(work, valid, codes, hit, defect_step, meta.draw[slot]))
        # answers: one speculation-form query each
        exists = unit < answer_total
        slot = jnp.where(exists, _locate(answer_cumulative, need.answer_units, unit)[0], 0)
        step = need.spec_at[slot]
        x, answer = answer_of(slot, step)
        draw = meta.draw[slot]
        evaluated = exists & (need.scoring[slot] == 0)
        work = deliver(work, slot, exists, answer, need.spec_rows[slot], evaluated, draw)
        codes, hit = jax.vmap(process.answer_defect)(x, step, answer)
        return work._replace(defect=record(work, exists, codes, hit, step, draw))

    def set_call(index, work: Work) -> Work:
        unit = index * chunk + jnp.arange(chunk)
        valid = unit < total
        slot, offset = _locate(cumulative, need.units, unit)
        slot = jnp.where(valid, slot, 0)
        first = meta.served[slot] + offset
        draw = meta.draw[slot]
        exists = valid & (first < need.items[slot])
        scoring = first < need.scoring[slot]
        step = jnp.where(scoring, meta.block_start[slot] + 1 + first, need.spec_at[slot])
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
            x, answer = answer_of(slot, step)
            reduced = jax.vmap(process.reduce)(x, safe_step, answer)
            log_mu = jax.vmap(process.target_logp)(x, safe_step, reduced)
            codes, hit = jax.vmap(process.answer_defect)(x, step, answer)
        scores = exists & scoring
        work = score(
            work,
            slot,
            valid,
            safe_step[:, None],
            scores[:, None],
            jax.tree.map(lambda leaf: leaf[:, None], reduced),
            log_mu[:, None],
            scores,
            jnp.where(scores, 1, 0),
        )
        spec = exists & ~scoring
        work = deliver(work, slot, spec, answer, need.spec_rows[slot], spec, draw)
        return work._replace(defect=record(work, exists, codes, hit, step, draw))

    work = Work(pool.scores, pool.answers, window_rows, queries, conditionals, defect)
    work = jax.lax.fori_loop(0, trips, block_call if plan.block_mode else set_call, work)

    # the slots whose query is complete take their answers
    before = cumulative - need.units
    served_units = jnp.clip(total - before, 0, need.units)
    if plan.block_mode:
        scored = jnp.minimum(need.scoring, meta.served % ANSWERED + served_units * plan.unit_rows)
        answered = (meta.served >= ANSWERED) | (
            (need.answer_units > 0) & (answer_cumulative <= answer_total)
        )
        complete = need.asks & (trips > 0) & (scored >= need.scoring) & (answered | ~need.has_spec)
        served = scored + jnp.where(answered, ANSWERED, 0)
    else:
        served = jnp.minimum(need.items, meta.served + served_units)
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
    if plan.block_mode:
        total = total + answer_total
    return pool, work.window_rows, work.queries, work.conditionals, work.defect, total
