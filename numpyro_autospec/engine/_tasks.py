"""What a task does between rounds: :func:`advance` takes a slot an event reached as far as
it goes without the oracle, in masked steps (docs/algorithm.md, section 3): (1) **consume**
the event: verify a scored root window, accept a scored recursion block with probability
``min(1, mu/nu)`` or start its residual loop, or take a leaf step; (2) **move on** after a
finished block (a trial to its right half, a root by :func:`next_root_block`); (3) **set up**
a block: a leaf, a speculation ``x' ~ nu`` or a query for ``O_a``; (4) **finish** a range: a
trial's residual test ``max(0, 1 - nu/mu)`` and report, a root's final query.  Keys are
derived as in :mod:`numpyro_autospec.reference`, so the draws are the reference's."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core.rejection import residual_log_accept_prob, speculation_log_accept_prob
from numpyro_autospec._core.root_policy import RootPolicy, wants_lookahead
from numpyro_autospec._core.verification import VERIFIERS
from numpyro_autospec.engine._plan import Plan
from numpyro_autospec.engine._pool import NO_TRIAL, Meta, Scores, Status, choose, flatten, unflatten

__all__ = [
    "Lane",
    "Moved",
    "advance",
    "block_key",
    "next_root_block",
    "rows_after_block",
]


class Lane(NamedTuple):
    """What :func:`advance` reads of one slot."""

    slot: Array  # int32: the slot's index
    meta: Meta
    scores: Scores
    keys: Array  # key[3]
    x: tuple  # the process state's buffers (:class:`~numpyro_autospec.engine._pool.Layout`)
    answer: Any  # the current block's speculation answer (its owner's buffer)
    next_answer: Any  # the slot's lookahead buffer
    parent_answer: Any  # the parent's block answer (a trial's residual test)
    window_rows: Any  # a root's scored window rows (verification buffer)


class Moved(NamedTuple):
    """What :func:`advance` returns of one slot."""

    meta: Meta
    scores: Scores
    x: tuple  # the process state's buffers
    reports: Array  # bool: a trial finished and reports to its parent
    accepted: Array  # bool: its residual test accepted it


class RootBlock(NamedTuple):
    end: Array  # end of the next block (its start is the cursor)
    verifying: Array  # the next block is a window
    window: Array
    advanced: Array
    windows: Array


def materialized(tree):
    """``tree`` computed once, not fused (hash chains and all) into each consumer."""
    return jax.lax.optimization_barrier(tree)


def block_keys_of(meta: Meta, keys: Array) -> tuple[Array, Array]:
    """The keys of a slot's current and next blocks (:func:`block_key`), in one hash."""
    indices = jnp.stack([meta.block_index, meta.block_index + 1])
    folded = jax.vmap(jax.random.fold_in, (None, 0))(keys[0], indices)
    trial_keys = jnp.stack([jnp.where(meta.block_index == 0, keys[0], keys[1]), keys[1]])
    both = jnp.where(meta.parent < 0, folded, trial_keys)
    return both[0], both[1]


def block_key(meta: Meta, keys: Array) -> Array:
    """The key of a slot's current block: ``fold_in(run key, j)`` for a root's block ``j``, a
    trial's left or right key for its halves."""
    root_key = jax.random.fold_in(keys[0], meta.block_index)
    trial_key = jnp.where(meta.block_index == 0, keys[0], keys[1])
    return jnp.where(meta.parent < 0, root_key, trial_key)


def next_root_block(policy: RootPolicy, meta: Meta, cursor: Array) -> RootBlock:
    """Where a root goes after its current block, kept up to ``cursor``: a recursion block
    (no windows, or a fallback), else the next window.  Elementwise."""
    recursion_end = jnp.minimum(cursor + policy.recursion_block, meta.stop)
    if policy.rule is None:
        false = jnp.zeros_like(meta.verifying)
        return RootBlock(recursion_end, false, meta.window, meta.advanced, meta.windows)
    ended = meta.verifying == 1
    after = policy.after_window(
        meta.window,
        meta.advanced,
        meta.windows,
        meta.block_start,
        cursor,
        meta.block_end,
        meta.stop,
    )
    fallback = ended & after.fallback
    window = jnp.where(ended, after.window, meta.window)
    return RootBlock(
        end=jnp.where(fallback, recursion_end, jnp.minimum(cursor + window, meta.stop)),
        verifying=(~fallback).astype(jnp.int32),
        window=window,
        advanced=jnp.where(ended, after.advanced, meta.advanced),
        windows=jnp.where(ended, after.windows, meta.windows),
    )


def rows_after_block(plan: Plan, meta: Meta) -> Array:
    """Steps of the block after the current one if it is kept whole (the lookahead's rows)."""
    root = next_root_block(plan.policy, meta, meta.block_end).end - meta.block_end
    trial = jnp.where(meta.block_index == 0, meta.stop - meta.block_end, meta.tail_rows)
    return jnp.where(meta.parent < 0, root, trial)


def _verify(plan: Plan, process, lane: Lane, x, key_verify: Array):
    """Verify a scored root window: its valid prefix plus a corrected step; returns
    ``(x, cursor, full)``."""
    meta, answer = lane.meta, lane.answer
    length = meta.block_end - meta.block_start
    steps = jnp.minimum(meta.block_start + jnp.arange(plan.window_size), meta.block_end - 1)
    first = process.reduce(x, meta.block_start, answer)
    target_rows = jax.tree.map(lambda rows, row: rows.at[0].set(row), lane.window_rows, first)
    draft_rows = jax.vmap(process.spec_reduce, (None, None, 0, None))(
        x, meta.block_start, steps, answer
    )
    values = jax.vmap(process.step_value, (None, 0))(x, steps)
    verdict = VERIFIERS[plan.policy.rule](key_verify, target_rows, draft_rows, values, length)
    full = verdict.kept == length
    corrected = process.set_step_value(
        x, jnp.minimum(meta.block_start + verdict.kept, meta.block_end - 1), verdict.correction
    )
    cursor = jnp.where(full, meta.block_end, meta.block_start + verdict.kept + 1)
    return choose(full, x, corrected), cursor, full


def scoring_items(plan: Plan, meta: Meta) -> Array:
    """Items of a speculated block's scoring query: ``m - 1`` steps and the lookahead."""
    length = meta.block_end - meta.block_start
    lookahead = wants_lookahead(meta.block_end, plan.num_steps, plan.final_query)
    spec = jnp.maximum(meta.next_rows, 1) if plan.block_mode else 1
    return length - 1 + jnp.where(lookahead, spec, 0)


def advance(context, lane: Lane) -> Moved:
    """The composed transition of one slot (the module docstring's four steps)."""
    plan, process = context.plan, context.process
    policy = plan.policy
    meta, scores = lane.meta, lane.scores
    x = unflatten(plan.state_layout, lane.x)
    is_root = meta.parent < 0

    # ``split(key)[i]`` is ``fold_in(key, i)``: one hash for the blocks' keys, one for theirs
    key, key_next = materialized(block_keys_of(meta, lane.keys))
    step = meta.cursor - meta.block_start
    zero = jnp.zeros_like(step)
    key_accept, key_leaf, key_first, key_second = materialized(
        jax.vmap(jax.random.fold_in)(
            jnp.stack([key, key, key, key_next]), jnp.stack([zero + 1, step, zero, zero])
        )
    )

    # -- 1. consume the event --------------------------------------------------------------
    length = meta.block_end - meta.block_start
    scored = meta.status == Status.SCORED
    if policy.rule is not None:
        verify = scored & (meta.verifying == 1)
        x_verified, cursor_verified, full = _verify(plan, process, lane, x, key_accept)
        x = choose(verify, x_verified, x)
        meta = meta._replace(
            status=jnp.where(verify, Status.BLOCK_DONE, meta.status),
            cursor=jnp.where(verify, cursor_verified, meta.cursor),
            has_next=jnp.where(verify & ~full, 0, meta.has_next),
        )
    # a block's acceptance min(1, mu/nu) or a finished trial's residual test max(0, 1 - nu/mu)
    decide = scored & (meta.verifying == 0)
    finishing = meta.status == Status.FINISHED
    log_nu = process.spec_logp(
        x,
        jnp.where(finishing, meta.start, meta.block_start),
        jnp.where(finishing, meta.stop - meta.start, length),
        choose(finishing, lane.parent_answer, lane.answer),
    )
    uniform = jax.random.uniform(jnp.where(finishing, lane.keys[2], key_accept))
    log_accept = jnp.where(
        finishing,
        residual_log_accept_prob(scores.log_mu_total, log_nu),
        speculation_log_accept_prob(scores.log_mu_block, log_nu),
    )
    accepted = jnp.log(uniform) < log_accept
    accept, reject = decide & accepted, decide & ~accepted
    status = jnp.where(reject, Status.WAITING, jnp.where(finishing, Status.FREE, meta.status))
    meta = meta._replace(
        status=jnp.where(accept, Status.BLOCK_DONE, status),
        cursor=jnp.where(accept, meta.block_end, meta.cursor),
        epoch=meta.epoch + (reject | finishing),
        trial_next=jnp.where(reject, 0, meta.trial_next),
        batch=jnp.where(reject, 0, meta.batch),
        batch_end=jnp.where(reject, int(plan.batch_sizes[0]), meta.batch_end),
        best_trial=jnp.where(reject, NO_TRIAL, meta.best_trial),
    )
    leaf = (meta.status == Status.LEAF) & (meta.has_answer == 1)
    reduced = process.reduce(x, meta.cursor, lane.answer)
    x_leaf = process.target_sample(key_leaf, x, meta.cursor, reduced)
    log_mu_leaf = process.target_logp(x_leaf, meta.cursor, reduced)
    x = choose(leaf, x_leaf, x)
    scores = scores._replace(
        log_mu_block=jnp.where(leaf, scores.log_mu_block + log_mu_leaf, scores.log_mu_block)
    )
    cursor = meta.cursor + 1
    meta = meta._replace(
        status=jnp.where(
            leaf, jnp.where(cursor == meta.block_end, Status.BLOCK_DONE, Status.LEAF), meta.status
        ),
        cursor=jnp.where(leaf, cursor, meta.cursor),
        has_answer=jnp.where(leaf, 0, meta.has_answer),
        has_next=jnp.where(leaf, 0, meta.has_next),
        owner=jnp.where(leaf, lane.slot, meta.owner),
        buffer=jnp.where(leaf, 0, meta.buffer),
    )

    # -- 2. move on after a finished block ---------------------------------------------------
    done = meta.status == Status.BLOCK_DONE
    finished = done & (meta.cursor >= meta.stop)
    moves_on = done & ~finished
    root = next_root_block(policy, meta, meta.cursor)
    next_buffer = jnp.where(meta.owner == lane.slot, 1 - meta.buffer, 0)
    cleared = Scores(jnp.zeros_like(scores.log_mu_block), scores.log_mu_total + scores.log_mu_block)
    scores = choose(done, cleared, scores)
    root_done = Status.DONE
    if plan.final_query:
        root_done = jnp.where(meta.has_next == 1, Status.DONE, Status.NEED_FINAL)
    flipped = meta._replace(
        status=jnp.where(finished, jnp.where(is_root, root_done, Status.FINISHED), Status.START),
        has_answer=meta.has_next,
        has_next=jnp.zeros_like(meta.has_next),
        owner=jnp.zeros_like(meta.owner) + lane.slot,
        buffer=next_buffer,
        block_index=meta.block_index + 1,
        block_start=jnp.where(finished, meta.block_start, meta.cursor),
        block_end=jnp.where(finished, meta.block_end, jnp.where(is_root, root.end, meta.stop)),
        cursor=jnp.where(finished & is_root, meta.stop, meta.cursor),
        verifying=jnp.where(is_root & ~finished, root.verifying, 0),
        window=jnp.where(is_root, root.window, meta.window),
        advanced=jnp.where(is_root, root.advanced, meta.advanced),
        windows=jnp.where(is_root, root.windows, meta.windows),
        served=jnp.zeros_like(meta.served),
    )
    meta = choose(done, flipped, meta)
    answer = choose(moves_on, lane.next_answer, lane.answer)

    # -- 3. set up a new block ----------------------------------------------------------------
    starting = meta.status == Status.START
    length = meta.block_end - meta.block_start
    is_leaf = (length <= policy.leaf_size) & (meta.verifying == 0)
    speculate = starting & ~is_leaf & (meta.has_answer == 1)
    # fold_in(key, 0) of the next block's key when the slot moved on, else the current's
    key_speculation = jnp.where(moves_on, key_second, key_first)
    x_speculated = process.spec_sample(key_speculation, x, meta.block_start, length, answer)
    first = process.reduce(x_speculated, meta.block_start, answer)
    x = choose(speculate, x_speculated, x)
    log_mu_first = process.target_logp(x_speculated, meta.block_start, first)
    log_mu_block = jnp.where(starting & is_leaf, 0.0, scores.log_mu_block)
    scores = scores._replace(log_mu_block=jnp.where(speculate, log_mu_first, log_mu_block))
    asks = starting & ~speculate & (meta.has_answer == 0)  # a leaf or a block without O_a
    meta = meta._replace(
        next_rows=jnp.where(starting, rows_after_block(plan, meta), meta.next_rows)
    )
    no_items = scoring_items(plan, meta) == 0
    set_up = jnp.where(no_items, Status.SCORED, Status.SCORING)
    set_up = jnp.where(speculate, set_up, Status.NEED_ANSWER)
    set_up = jnp.where(is_leaf, Status.LEAF, set_up)
    meta = meta._replace(
        status=jnp.where(starting, set_up, meta.status),
        cursor=jnp.where(starting & is_leaf, meta.block_start, meta.cursor),
        served=jnp.where(starting, 0, meta.served),
        owner=jnp.where(asks, lane.slot, meta.owner),
        buffer=jnp.where(asks, 0, meta.buffer),
    )
    return Moved(meta, scores, flatten(plan.state_layout, x), finishing, finishing & accepted)
