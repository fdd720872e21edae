"""One round: every ready query, in ``ceil(U / chunk)`` batched oracle calls for ``U`` units.

A waiting slot asks for *items*: the scoring steps ``a+1..a+m-1`` of its speculated block,
then its answer (``O_a``, a leaf step's, a lookahead or a final query).  A *unit* is one
evaluation: in **block mode** (``scores_blocks``) a ``score_and_query`` call of up to
``unit_rows`` rows (docs/algorithm.md, section 2a) with the answer in the slot's last unit,
otherwise one ``query(x, k, R)``."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core.root_policy import wants_lookahead
from numpyro_autospec.engine._compact import count_at_most, running_sum, segment_total
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import Meta, Pool, Status, pack, repack, unflatten, unpack
from numpyro_autospec.engine._sharding import sharded_batch
from numpyro_autospec.engine._trials import next_buffer
from numpyro_autospec.errors import nonfinite_defect

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
    has_spec: Array  # bool: the query includes an answer


def demand(plan: Plan, meta: Meta) -> Demand:
    """The items and units of every slot's query (:class:`Demand`)."""
    status = meta.status
    length = meta.block_end - meta.block_start
    need_answer = status == Status.NEED_ANSWER
    leaf = (status == Status.LEAF) & (meta.has_answer == 0)
    scoring = status == Status.SCORING
    final = status == Status.NEED_FINAL
    lookahead = scoring & wants_lookahead(meta.block_end, plan.num_steps, plan.final_query)
    spec_rows = jnp.where(
        need_answer, length, jnp.where(scoring, jnp.maximum(meta.next_rows, 1), 1)
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
        # the scoring rows in units of unit_rows, the answer with the last (or alone)
        remaining = jnp.where(asks, jnp.maximum(score_items - meta.served, 0), 0)
        units = jnp.maximum(-(-remaining // plan.unit_rows), (asks & has_spec).astype(jnp.int32))
    else:
        units = jnp.where(asks, jnp.maximum(items - meta.served, 0), 0)
    return Demand(asks, score_items, items, spec_at, spec_rows, destination, units, has_spec)


class Work(NamedTuple):
    """The round's loop carry."""

    scores: Array
    answers: Any
    window_rows: Any
    defect: Array


class Item(NamedTuple):
    """What a unit reads of its slot (columns of one ``int32[S, F]`` table)."""

    before: Array  # units of the slots before it (where its first unit falls)
    units: Array  # units of its own in this round's demand
    scored: Array  # items already served (block mode: scoring items)
    scoring: Array
    block_start: Array
    draw: Array
    is_window: Array  # a root window: its rows go to the verification buffer
    spec_at: Array
    has_spec: Array
    destination: Array


def _items(plan: Plan, meta: Meta, need: Demand, cumulative: Array) -> Array:
    """The :class:`Item` table of every slot."""
    slots = jnp.arange(plan.num_slots)
    return pack(
        Item(
            before=cumulative - need.units,
            units=need.units,
            scored=meta.served,
            scoring=need.scoring,
            block_start=meta.block_start,
            draw=meta.draw,
            is_window=(slots < plan.num_draws) & (meta.verifying == 1),
            spec_at=need.spec_at,
            has_spec=need.has_spec,
            destination=need.destination,
        )
    )


def _counted(plan: Plan, meta: Meta, need: Demand, after: Array, answered_now: Array | None):
    """The round's queries and conditionals per draw, from the items served before
    (``meta.served``) and ``after`` it: a block-mode query counts once, else every item."""
    before = meta.served
    if plan.block_mode:
        rows = after - before
        queries = ((before == 0) & ((rows > 0) | answered_now)).astype(jnp.int32)
        spec = answered_now
    else:
        rows = jnp.clip(after, 0, need.scoring) - jnp.clip(before, 0, need.scoring)
        spec = need.has_spec & (before <= need.scoring) & (after > need.scoring)
        queries = rows + spec
    conditionals = rows + jnp.where(spec, need.spec_rows, 0)
    added = segment_total(
        jnp.stack([queries, conditionals], axis=-1).astype(jnp.int32), meta.draw, plan.num_draws
    )
    return added[:, 0], added[:, 1]


def _scoring_steps(plan: Plan, item: Item, first, valid):
    """Block mode: the steps of the scoring units' rows (``[B, L]``), and which exist."""
    index = first[:, None] + jnp.arange(plan.unit_rows)[None, :]
    exists = valid[:, None] & (index < item.scoring[:, None])
    step = jnp.clip(item.block_start[:, None] + 1 + index, 0, plan.num_steps - 1)
    return step, exists


def query_round(context, pool: Pool, counters, defect: Array, quiet: Array):
    """When ``quiet``, evaluate and deliver the round's ``U`` units; returns
    ``(pool, window_rows, queries, conditionals, defect, U)``."""
    plan, process = context.plan, context.process
    size, chunk = plan.num_slots, plan.chunk
    stored = meta = unpack(Meta, pool.meta)
    need = demand(plan, meta)
    cumulative = running_sum(need.units)
    total = jnp.where(quiet, jnp.minimum(cumulative[-1], plan.max_units), 0)
    trips = -(-total // chunk)
    table = _items(plan, meta, need, cumulative)
    window_rows, queries, conditionals = counters

    def at(cumulative_units: Array, unit: Array, valid: Array) -> tuple[Array, Item]:
        slot = jnp.minimum(count_at_most(cumulative_units, unit), size - 1)
        slot = jnp.where(valid, slot, 0)
        return slot, unpack(Item, table[slot])

    def states(slot):
        return unflatten(plan.state_layout, tuple(leaf[slot] for leaf in pool.x), 1)

    def record(work: Work, valid, codes, hit, step, draw) -> Array:
        """The run's first defect ``(code, row, step, draw)``."""
        if not context.validate:
            return work.defect
        bad = valid & (codes > 0)
        lane = jnp.argmax(bad)
        found = jnp.stack([codes[lane], hit[lane], step[lane], draw[lane]])
        return jnp.where(jnp.any(bad) & (work.defect[0] == 0), found, work.defect)

    def deliver(work: Work, slot, item: Item, exists, answer) -> Work:
        target = (jnp.where(exists, slot, size), item.destination)
        answers = jax.tree.map(
            lambda leaf, new: leaf.at[target].set(new, mode="drop"), work.answers, answer
        )
        return work._replace(answers=answers)

    def score(work: Work, slot, item: Item, valid, step, exists, rows, log_mu) -> Work:
        """Rows ``[B, L, ...]`` into their blocks' scores and root windows' buffers."""
        window_target = (
            jnp.where(exists & (item.is_window == 1)[:, None], slot[:, None], plan.num_draws),
            jnp.clip(step - item.block_start[:, None], 0, plan.window_size - 1),
        )
        window_rows = jax.tree.map(
            lambda leaf, new: leaf.at[window_target].set(new, mode="drop"), work.window_rows, rows
        )
        added = jnp.sum(jnp.where(exists, log_mu, 0.0), axis=1)
        return work._replace(
            scores=work.scores.at[jnp.where(valid, slot, size), 0].add(added, mode="drop"),
            window_rows=window_rows,
        )

    def block_call(index, work: Work) -> Work:
        unit = index * chunk + jnp.arange(chunk)
        valid = unit < total
        slot, item = at(cumulative, unit, valid)
        local = unit - item.before
        first = item.scored + local * plan.unit_rows
        step, exists = _scoring_steps(plan, item, first, valid)
        answers = valid & (local == item.units - 1) & (item.has_spec == 1)
        x = states(slot)
        score_query = jax.vmap(lambda x, s, k: process.score_and_query(x, s, k, plan.answer_rows))
        rows, answer = sharded_batch(plan.mesh, score_query, x, step, item.spec_at)
        log_mu = jax.vmap(jax.vmap(process.target_logp, (None, 0, 0)))(x, step, rows)
        work = score(work, slot, item, valid, step, exists, rows, log_mu)
        work = deliver(work, slot, item, answers, answer)
        codes, hit, row = jax.vmap(process.rows_defect)(x, step, rows, exists)
        scoring = (valid, codes, hit, step[jnp.arange(chunk), row], item.draw)
        codes, hit = jax.vmap(process.answer_defect)(x, item.spec_at, answer)
        answered = (answers, codes, hit, item.spec_at, item.draw)
        both = [jnp.concatenate(pair) for pair in zip(scoring, answered, strict=True)]
        return work._replace(defect=record(work, *both))

    def set_call(index, work: Work) -> Work:
        unit = index * chunk + jnp.arange(chunk)
        valid = unit < total
        slot, item = at(cumulative, unit, valid)
        first = item.scored + unit - item.before
        scoring = first < item.scoring
        step = jnp.where(scoring, item.block_start + 1 + first, item.spec_at)
        step = jnp.clip(step, 0, plan.num_steps)
        safe_step = jnp.minimum(step, plan.num_steps - 1)
        if process.batched_queries:
            x = None
            pooled = unflatten(plan.state_layout, pool.x, 1)
            answer = sharded_batch(
                plan.mesh, lambda s, k: process.query_batch(pooled, s, k), slot, step
            )
            reduced, log_mu = process.score_batch(pooled, slot, safe_step, answer)
            codes, hit = jax.vmap(nonfinite_defect)(answer)
        else:
            x = states(slot)
            query = jax.vmap(lambda x, k: process.query(x, k, plan.answer_rows))
            answer = sharded_batch(plan.mesh, query, x, step)
            reduced = jax.vmap(process.reduce)(x, safe_step, answer)
            log_mu = jax.vmap(process.target_logp)(x, safe_step, reduced)
            codes, hit = jax.vmap(process.answer_defect)(x, step, answer)
        scores = valid & scoring
        rows = jax.tree.map(lambda leaf: leaf[:, None], reduced)
        work = score(
            work, slot, item, valid, safe_step[:, None], scores[:, None], rows, log_mu[:, None]
        )
        work = deliver(work, slot, item, valid & ~scoring, answer)
        return work._replace(defect=record(work, valid, codes, hit, step, item.draw))

    work = Work(pool.scores, pool.answers, window_rows, defect)
    work = jax.lax.fori_loop(0, trips, block_call if plan.block_mode else set_call, work)

    before = cumulative - need.units
    served_units = jnp.clip(total - before, 0, need.units)
    if plan.block_mode:
        served = jnp.minimum(need.scoring, meta.served + served_units * plan.unit_rows)
        complete = need.asks & (trips > 0) & (served_units == need.units)
        counted = _counted(plan, meta, need, served, complete & need.has_spec)
    else:
        served = jnp.minimum(need.items, meta.served + served_units)
        complete = need.asks & (trips > 0) & (served >= need.items)
        counted = _counted(plan, meta, need, served, None)
    added_queries, added_conditionals = counted
    status = meta.status
    lookahead = (status == Status.SCORING) & wants_lookahead(
        meta.block_end, plan.num_steps, plan.final_query
    )
    arrived = jnp.where(status == Status.NEED_FINAL, Status.DONE, status)
    arrived = jnp.where(status == Status.SCORING, Status.SCORED, arrived)
    arrived = jnp.where(status == Status.NEED_ANSWER, Status.START, arrived)
    meta = meta._replace(
        status=jnp.where(complete, arrived, status),
        served=jnp.where(complete, 0, jnp.where(trips > 0, served, meta.served)),
        has_answer=jnp.where(complete & (status != Status.SCORING), 1, meta.has_answer),
        has_next=jnp.where(complete & lookahead, 1, meta.has_next),
    )
    pool = pool._replace(
        meta=repack(pool.meta, stored, meta), scores=work.scores, answers=work.answers
    )
    return (
        pool,
        work.window_rows,
        queries + added_queries,
        conditionals + added_conditionals,
        work.defect,
        total,
    )
