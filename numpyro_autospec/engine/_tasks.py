"""What a task does between rounds: one composed transition per slot (vmapped over a pass's
lanes).

A slot moves when an event reached it (a round answered its query, its residual loop resolved,
it was just set up).  :func:`advance` then takes it as far as it can go without an oracle answer,
in a fixed sequence of masked steps (docs/algorithm.md, section 3):

1. **consume** the event: verify a scored root window (:mod:`numpyro_autospec._core.verification`),
   accept a scored recursion block with probability ``min(1, mu/nu)`` or start its residual
   loop, or take a leaf step;
2. **move on** after a finished block: a trial runs its right half, a root follows its
   :class:`~numpyro_autospec._core.root_policy.RootPolicy` (:func:`next_root_block`);
3. **set up** a new block: a leaf, a speculation ``x' ~ nu`` from the known answer (scored in
   the next round, with the lookahead), or a query for ``O_a``;
4. **finish** a range: a trial takes its residual test ``max(0, 1 - nu/mu)`` and reports to its
   parent (:mod:`~numpyro_autospec.engine._trials` applies the report), a root asks for its
   final query or is done.

Every random number comes from the keys of :mod:`numpyro_autospec._core.rejection`, derived exactly
as
in :mod:`numpyro_autospec.reference`, so the engine's draws equal the reference's key for key.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec._core.rejection import residual_log_accept_prob, speculation_log_accept_prob
from numpyro_autospec._core.root_policy import RootPolicy
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
    "wants_lookahead",
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


def wants_lookahead(plan: Plan, end: Array) -> Array:
    """Whether a block ending at ``end`` also queries the step right after it (the
    lookahead: every block but the last, and the last where the process needs a final
    query)."""
    return (end < plan.num_steps) | ((end == plan.num_steps) & plan.final_query)


def materialized(tree):
    """``tree`` computed once where it is made: derived keys feed hashes of their own, and XLA
    would otherwise fuse the derivation into every element of each consumer (recomputed per
    element, and a chain of hashes per fusion that takes seconds to compile)."""
    return jax.lax.optimization_barrier(tree)


def block_keys_of(meta: Meta, keys: Array) -> tuple[Array, Array]:
    """The keys of a slot's current block and of the block after it (:func:`block_key`), in
    one hash."""
    indices = jnp.stack([meta.block_index, meta.block_index + 1])
    folded = jax.vmap(jax.random.fold_in, (None, 0))(keys[0], indices)
    trial_keys = jnp.stack([jnp.where(meta.block_index == 0, keys[0], keys[1]), keys[1]])
    both = jnp.where(meta.parent < 0, folded, trial_keys)
    return both[0], both[1]


def block_key(meta: Meta, keys: Array) -> Array:
    """The key of a slot's current block, as in :mod:`numpyro_autospec.reference`: block ``j``
    of a root uses ``fold_in(run key, j)``; a trial's left half its left key, its right half
    its right key."""
    root_key = jax.random.fold_in(keys[0], meta.block_index)
    trial_key = jnp.where(meta.block_index == 0, keys[0], keys[1])
    return jnp.where(meta.parent < 0, root_key, trial_key)


def next_root_block(policy: RootPolicy, meta: Meta, cursor: Array) -> RootBlock:
    """Where a root goes after its current block, kept up to ``cursor``: the next recursion
    block (a root without windows), or, after a window, a recursion block if the policy falls
    back, else the next window of the adapted size; after a fallback block, the window decided
    with it.  Elementwise (any shape)."""
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
    """Steps of the block that follows the current one when it is kept whole: what its
    lookahead must answer.  A root: the next block of its policy; a trial: its right half
    after its left, else the block its parent runs next (``tail_rows``).  Elementwise."""
    root = next_root_block(plan.policy, meta, meta.block_end).end - meta.block_end
    trial = jnp.where(meta.block_index == 0, meta.stop - meta.block_end, meta.tail_rows)
    return jnp.where(meta.parent < 0, root, trial)


def _verify(plan: Plan, process, lane: Lane, x, key_verify: Array):
    """A scored root window ``[a, a+m)``: the longest valid prefix plus a corrected step
    (token or block verification).  Row 0 of the target rows is read from ``O_a``, the rest
    from the rows the scoring round stored.  Returns ``(x, cursor, full)``."""
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
    """Items a speculated block's scoring query asks for: its ``m - 1`` scoring steps, and the
    lookahead (its ``next_rows`` rows in block mode, one query otherwise).  Elementwise."""
    length = meta.block_end - meta.block_start
    lookahead = wants_lookahead(plan, meta.block_end)
    spec = jnp.maximum(meta.next_rows, 1) if plan.block_mode else 1
    return length - 1 + jnp.where(lookahead, spec, 0)


def advance(context, lane: Lane) -> Moved:
    """The composed transition of one slot (the module docstring's four steps)."""
    plan, process = context.plan, context.process
    policy = plan.policy
    meta, scores = lane.meta, lane.scores
    x = unflatten(plan.state_layout, lane.x)
    is_root = meta.parent < 0

    # the keys of the current block and of the next (``block_keys(key)[i]`` and
    # ``split(key)[i]`` are ``fold_in(key, i)``): one hash for the blocks' keys, one for the
    # keys drawn from them
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
        # a window's verification key is split(key)[1] = fold_in(key, 1)
        x_verified, cursor_verified, full = _verify(plan, process, lane, x, key_accept)
        x = choose(verify, x_verified, x)
        meta = meta._replace(
            status=jnp.where(verify, Status.BLOCK_DONE, meta.status),
            cursor=jnp.where(verify, cursor_verified, meta.cursor),
            has_next=jnp.where(verify & ~full, 0, meta.has_next),
        )
    # a scored recursion block's acceptance min(1, mu/nu), or a finished trial's residual test
    # max(0, 1 - nu/mu) over its range under its parent's speculation: one density, one draw
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
    meta = meta._replace(
        status=jnp.where(
            accept,
            Status.BLOCK_DONE,
            jnp.where(reject, Status.WAITING, jnp.where(finishing, Status.FREE, meta.status)),
        ),
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
            leaf,
            jnp.where(cursor == meta.block_end, Status.BLOCK_DONE, Status.LEAF),
            meta.status,
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
    scores = choose(
        done,
        Scores(jnp.zeros_like(scores.log_mu_block), scores.log_mu_total + scores.log_mu_block),
        scores,
    )
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
    # the new block's answer is the lookahead, in the buffer the flip points to
    answer = choose(moves_on, lane.next_answer, lane.answer)

    # -- 3. set up a new block ----------------------------------------------------------------
    starting = meta.status == Status.START
    length = meta.block_end - meta.block_start
    is_leaf = (length <= policy.leaf_size) & (meta.verifying == 0)
    speculate = starting & ~is_leaf & (meta.has_answer == 1)
    # a window's and a block's speculation key is fold_in(key, 0): the key of the block
    # after the current one when the slot moved on, else the current block's
    key_speculation = jnp.where(moves_on, key_second, key_first)
    x_speculated = process.spec_sample(key_speculation, x, meta.block_start, length, answer)
    first = process.reduce(x_speculated, meta.block_start, answer)
    x = choose(speculate, x_speculated, x)
    log_mu_first = process.target_logp(x_speculated, meta.block_start, first)
    scores = scores._replace(
        log_mu_block=jnp.where(
            speculate, log_mu_first, jnp.where(starting & is_leaf, 0.0, scores.log_mu_block)
        )
    )
    asks = starting & ~speculate & (meta.has_answer == 0)  # a leaf or a block without O_a
    meta = meta._replace(
        next_rows=jnp.where(starting, rows_after_block(plan, meta), meta.next_rows)
    )
    no_items = scoring_items(plan, meta) == 0
    meta = meta._replace(
        status=jnp.where(
            starting,
            jnp.where(
                is_leaf,
                Status.LEAF,
                jnp.where(
                    speculate,
                    jnp.where(no_items, Status.SCORED, Status.SCORING),
                    Status.NEED_ANSWER,
                ),
            ),
            meta.status,
        ),
        cursor=jnp.where(starting & is_leaf, meta.block_start, meta.cursor),
        served=jnp.where(starting, 0, meta.served),
        owner=jnp.where(asks, lane.slot, meta.owner),
        buffer=jnp.where(asks, 0, meta.buffer),
    )
    return Moved(meta, scores, flatten(plan.state_layout, x), finishing, finishing & accepted)
