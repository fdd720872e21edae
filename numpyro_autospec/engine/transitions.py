"""Per-slot transitions: what a task does between rounds, without an oracle answer.

Each transition is a function of one slot (a :class:`~numpyro_autospec.engine.pool.Pool` row),
vmapped by :func:`phase` over up to ``max_transitions`` compacted slots that need it:

* :func:`local_step` -- the cheap ones: sample a leaf step whose answer is known, move a driver
  past a finished block (:func:`next_block`), and set up a new block (leaf, speculation, or a
  query for ``O_a``);
* :func:`speculate` -- ``x' ~ nu`` frozen at ``O_a`` and the scoring round set up;
* :func:`decide` -- a scored recursion block accepts ``x'`` or starts its residual loop;
* :func:`finish` -- a finished range: a trial takes its residual test, a root completes.

The last three each cost a pass over the whole state, so they run in their own phases, on the
slots that need them only (:func:`advance`).  Root windows are verified per draw
(:mod:`numpyro_autospec.engine.windows`); trials are spawned, reported and resolved by
:mod:`numpyro_autospec.engine.trials`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine.plan import Plan
from numpyro_autospec.engine.pool import NO_TRIAL, Pool, Status, block_key, gather
from numpyro_autospec.engine.state import Context, block_answer, select
from numpyro_autospec.engine.windows import next_root_block
from numpyro_autospec.rejection import block_keys, residual_accepts, speculation_accepts

__all__ = [
    "wants_lookahead",
    "leaf_step",
    "local_step",
    "speculate",
    "decide",
    "finish",
    "next_block",
    "scored",
    "is_leaf_step",
    "is_local",
    "speculating",
    "deciding",
    "finishing",
    "advancing",
    "phase",
    "bounded_phases",
    "advance",
]


def wants_lookahead(plan: Plan, end: Array) -> Array:
    """Whether a block ending at ``end`` also queries the step right after it."""
    if not plan.lookahead:
        return jnp.zeros_like(end, bool)
    return (end < plan.num_steps) | ((end == plan.num_steps) & plan.final_query)


def leaf_step(context: Context, slot: Pool) -> Pool:
    """One sequential step of a leaf whose answer is known: ``x_k ~ mu(. | O_k)``, its
    log-density added to the block's.  A phase of its own, so that the other local
    transitions (:func:`local_step`) leave the state alone and do not move it."""
    process = context.process
    reduced = process.reduce(slot.x, slot.cursor, slot.answer)
    leaf_key = jax.random.fold_in(block_key(slot), slot.cursor - slot.block_start)
    x_leaf = process.target_sample(leaf_key, slot.x, slot.cursor, reduced)
    cursor = slot.cursor + 1
    return slot._replace(
        x=x_leaf,
        log_mu_block=slot.log_mu_block + process.target_logp(x_leaf, slot.cursor, reduced),
        cursor=cursor,
        has_answer=jnp.zeros_like(slot.has_answer),
        has_next=jnp.zeros_like(slot.has_next),
        status=jnp.where(cursor == slot.block_end, Status.BLOCK_DONE, Status.LEAF),
    )


def local_step(context: Context, slot: Pool) -> Pool:
    """Advance one task through the cheap transitions that need no oracle answer and leave
    its state alone: a finished block moves its driver on, a new block becomes a leaf, a
    speculation or a query for ``O_a``."""
    plan = context.plan

    # (a) a finished block: move the driver to the next block or finish the range
    slot = select(slot.status == Status.BLOCK_DONE, next_block(plan, slot), slot)

    # (b) a new block: leaf, speculate (answer known) or ask for O_a
    length = slot.block_end - slot.block_start
    is_leaf = (length <= plan.policy.leaf_size) & ~slot.verifying
    new_status = jnp.where(
        is_leaf,
        Status.LEAF,
        jnp.where(slot.has_answer, Status.SPECULATE, Status.NEED_ANSWER),
    )
    starting = slot.status == Status.START
    return slot._replace(
        status=jnp.where(starting, new_status, slot.status),
        cursor=jnp.where(starting & is_leaf, slot.block_start, slot.cursor),
        log_mu_block=jnp.where(starting & is_leaf, 0.0, slot.log_mu_block),
    )


def _bound(max_length: int | None) -> dict:
    """The keyword of a bounded speculation (none without a bound)."""
    return {} if max_length is None else {"max_length": max_length}


def speculate(context: Context, recursion: bool, slot: Pool, max_length: int | None = None) -> Pool:
    """``x' ~ nu`` frozen at ``O_a`` (window: ``split(key)[0]``; recursion block:
    ``block_keys(key)[0]``), and the scoring round is set up (``m - 1`` queries, plus the
    lookahead).  ``recursion``: every slot moved is a recursion block, which reads only
    :func:`~numpyro_autospec.engine.state.block_answer` of its answer.  ``max_length``: a
    static bound on the blocks' lengths (:func:`bounded_phases`)."""
    process = context.process
    key = block_key(slot)
    length = slot.block_end - slot.block_start
    key_speculation = jnp.where(slot.verifying, jax.random.split(key)[0], block_keys(key)[0])
    answer = block_answer(context, slot.answer) if recursion else slot.answer
    x_speculated = process.spec_sample(
        key_speculation, slot.x, slot.block_start, length, answer, **_bound(max_length)
    )
    first = process.reduce(x_speculated, slot.block_start, answer)
    return slot._replace(
        status=jnp.full_like(slot.status, Status.SCORING),
        x=x_speculated,
        log_mu_block=process.target_logp(x_speculated, slot.block_start, first),
        score_next=slot.block_start + 1,
        score_end=slot.block_end,
    )


def decide(context: Context, slot: Pool, max_length: int | None = None) -> Pool:
    """A scored recursion block: accept ``x'`` with probability ``min(1, mu/nu)``, else
    start the residual loop, or wait for the residual's enumeration round when the block is
    small enough (:attr:`~numpyro_autospec.config.RootPolicy.enumeration`).  ``max_length``:
    as in :func:`speculate`."""
    process = context.process
    _, key_accept, key_residual = block_keys(block_key(slot))
    length = slot.block_end - slot.block_start
    answer = block_answer(context, slot.answer)
    log_nu = process.spec_logp(slot.x, slot.block_start, length, answer, **_bound(max_length))
    accepted = speculation_accepts(key_accept, slot.log_mu_block, log_nu)
    accept_state = slot._replace(status=Status.BLOCK_DONE, cursor=slot.block_end)
    enumerates = length <= context.plan.policy.enumeration
    reject_state = slot._replace(
        status=jnp.where(enumerates, Status.ENUMERATE, Status.WAITING),
        epoch=slot.epoch + 1,
        key_residual=key_residual,
        trial_next=jnp.zeros_like(slot.trial_next),
        batch=jnp.zeros_like(slot.batch),
        batch_end=context.batch_sizes[0] + jnp.zeros_like(slot.batch_end),
        best_trial=jnp.full_like(slot.best_trial, NO_TRIAL),
    )
    return select(accepted, accept_state, reject_state)


def finish(context: Context, slot: Pool, max_length: int | None = None) -> Pool:
    """A finished range: a trial takes its residual test ``max(0, 1 - nu/mu)`` and
    reports; a root asks for its final query or completes.  ``max_length``: as in
    :func:`speculate`."""
    process, plan = context.process, context.plan
    # a trial's range is its parent's recursion block (a root's value is not used)
    log_nu = process.spec_logp(
        slot.x, slot.start, slot.stop - slot.start, slot.answer_parent, **_bound(max_length)
    )
    trial_accepts = residual_accepts(slot.key_accept, slot.log_mu_total, log_nu)
    if plan.final_query:
        root_status = jnp.where(slot.has_answer, Status.COMPLETE, Status.NEED_FINAL)
    else:
        root_status = jnp.full_like(slot.status, Status.COMPLETE)
    return slot._replace(
        status=jnp.where(slot.parent < 0, root_status, Status.REPORT),
        report_accept=trial_accepts,
        cursor=jnp.where(slot.parent < 0, slot.stop, slot.cursor),
    )


def next_block(plan: Plan, slot: Pool) -> Pool:
    """After a block: a trial runs its right half; a root follows its
    :class:`~numpyro_autospec.config.RootPolicy`
    (:func:`~numpyro_autospec.engine.windows.next_root_block`)."""
    is_root = slot.parent < 0
    finished = slot.cursor >= slot.stop
    root = next_root_block(plan.policy, slot)
    return slot._replace(
        status=jnp.where(finished, Status.FINISHED, Status.START),
        answer=slot.answer_next,
        has_answer=slot.has_next,
        has_next=jnp.zeros_like(slot.has_next),
        log_mu_total=slot.log_mu_total + slot.log_mu_block,
        log_mu_block=jnp.zeros_like(slot.log_mu_block),
        block_index=slot.block_index + 1,
        block_start=slot.cursor,
        block_end=jnp.where(finished, slot.block_end, jnp.where(is_root, root.end, slot.stop)),
        verifying=is_root & root.verifying & ~finished,
        window=jnp.where(is_root, root.window, slot.window),
        advanced=jnp.where(is_root, root.advanced, slot.advanced),
        windows=jnp.where(is_root, root.windows, slot.windows),
    )


def scored(plan: Plan, pool: Pool) -> Array:
    """Slots whose scoring round is done: every step scored and the lookahead (if any)
    answered."""
    lookahead_done = pool.has_next | ~wants_lookahead(plan, pool.block_end)
    scoring = pool.status == Status.SCORING
    return scoring & (pool.score_next >= pool.block_end) & lookahead_done


def is_leaf_step(pool: Pool) -> Array:
    """Slots :func:`leaf_step` moves: leaves whose answer is known."""
    return (pool.status == Status.LEAF) & pool.has_answer


def is_local(pool: Pool) -> Array:
    """Slots :func:`local_step` moves."""
    return (pool.status == Status.START) | (pool.status == Status.BLOCK_DONE)


def phase(plan: Plan, pool: Pool, mask: Array, transition) -> tuple[Pool, Array]:
    """Apply ``transition`` (one slot to one slot) to up to ``max_transitions`` slots of
    ``mask`` (compacted); skipped entirely when no slot needs it."""
    num_slots = plan.num_slots
    (index,) = jnp.nonzero(mask, size=plan.max_transitions, fill_value=num_slots)

    def apply(pool):
        gathered = gather(pool, jnp.minimum(index, num_slots - 1))
        moved = jax.vmap(transition)(gathered)
        # write back only the fields the transition changed (an unchanged field is the
        # gathered array itself): large answers are not copied back and forth
        return jax.tree.map(
            lambda leaf, new, old: leaf if new is old else leaf.at[index].set(new, mode="drop"),
            pool,
            moved,
            gathered,
        )

    return jax.lax.cond(jnp.any(mask), apply, lambda pool: pool, pool), jnp.any(mask)


def speculating(pool: Pool) -> Array:
    """Slots :func:`speculate` moves: blocks whose ``O_a`` is known."""
    return pool.status == Status.SPECULATE


def deciding(plan: Plan, pool: Pool) -> Array:
    """Slots :func:`decide` moves: recursion blocks (not root windows) whose scoring is done."""
    return scored(plan, pool) & ~pool.verifying


def finishing(pool: Pool) -> Array:
    """Slots :func:`finish` moves: finished ranges."""
    return pool.status == Status.FINISHED


def advancing(plan: Plan, pool: Pool) -> Array:
    """Slots :func:`advance` would move: the masks of its phases on ``pool``.  Each phase
    reads the pool the earlier ones left, so when none is set here none moves anything."""
    return (
        is_leaf_step(pool)
        | is_local(pool)
        | speculating(pool)
        | deciding(plan, pool)
        | finishing(pool)
    )


def bounded_phases(
    plan: Plan, pool: Pool, mask: Array, lengths: Array, transition
) -> tuple[Pool, Array]:
    """``transition(max_length)`` (a slot-to-slot function) on the slots of ``mask``: one
    :func:`phase` per bound of :attr:`~numpyro_autospec.engine.plan.Plan.speculation_lengths`,
    each on the slots whose block ``lengths`` fit it and not the bound before, so that a short
    block's speculation costs its own steps (a process that declares
    ``bounded_speculation``); one phase without a bound otherwise."""
    if not plan.speculation_lengths:
        return phase(plan, pool, mask, transition(None))
    moved, lower = jnp.zeros((), bool), None
    for bound in plan.speculation_lengths:
        fits = mask & (lengths <= bound) & (True if lower is None else lengths > lower)
        pool, moved_bound = phase(plan, pool, fits, transition(bound))
        moved, lower = moved | moved_bound, bound
    return pool, moved


def advance(context: Context, pool: Pool) -> tuple[Pool, Array]:
    """The transitions of up to ``max_transitions`` tasks each: leaf steps (each writes one
    step of the state), the other local ones (which leave the state alone, so that their
    phase neither copies nor writes it back), then the speculations, acceptance tests and
    residual tests (each a pass over the state, in a phase per bound of
    :func:`bounded_phases`).  Returns the pool and whether any task moved."""
    plan = context.plan

    def speculation(recursion):
        return lambda bound: functools.partial(speculate, context, recursion, max_length=bound)

    pool, moved_leaf = phase(plan, pool, is_leaf_step(pool), functools.partial(leaf_step, context))
    pool, moved_local = phase(plan, pool, is_local(pool), functools.partial(local_step, context))
    speculative = speculating(pool)
    block_lengths = pool.block_end - pool.block_start
    if plan.block_speculation:
        # windows speculate from whole answers, recursion blocks from their leading rows
        pool, moved_window = bounded_phases(
            plan, pool, speculative & pool.verifying, block_lengths, speculation(False)
        )
        pool, moved_block = bounded_phases(
            plan, pool, speculative & ~pool.verifying, block_lengths, speculation(True)
        )
        moved_speculate = moved_window | moved_block
    else:
        pool, moved_speculate = bounded_phases(
            plan, pool, speculative, block_lengths, speculation(False)
        )
    pool, moved_decide = bounded_phases(
        plan,
        pool,
        deciding(plan, pool),
        pool.block_end - pool.block_start,
        lambda bound: functools.partial(decide, context, max_length=bound),
    )
    pool, moved_finish = bounded_phases(
        plan,
        pool,
        finishing(pool),
        pool.stop - pool.start,
        lambda bound: functools.partial(finish, context, max_length=bound),
    )
    return pool, moved_leaf | moved_local | moved_speculate | moved_decide | moved_finish
