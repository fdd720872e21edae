"""Root windows: where the root of a draw goes after each block, and the verification of its
windows.

A root follows its :class:`~numpyro_autospec.config.RootPolicy`: recursion blocks of
``recursion_block`` steps, or windows (speculated, scored in one round, then verified by the token
or block rule of :mod:`numpyro_autospec.verification`), with a recursion block after a window that
kept little.  The decision and the adaptation of the window size are the policy's own
(:meth:`~numpyro_autospec.config.RootPolicy.after_window`, the same code as the reference's);
this module applies them to the pool (:func:`next_root_block`), keeps the scored target rows of
each draw's window in per-draw buffers (:func:`write_window_rows`) and verifies the scored windows
(:func:`verify_windows`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.config import RootPolicy
from numpyro_autospec.engine.plan import Plan
from numpyro_autospec.engine.pool import Pool, Status, block_key, gather, scatter
from numpyro_autospec.engine.state import Context, select
from numpyro_autospec.verification import VERIFIERS

__all__ = ["RootBlock", "next_root_block", "write_window_rows", "verify_windows"]


class RootBlock(NamedTuple):
    """The root's next block after its current one ends at ``slot.cursor``."""

    end: Array  # int32: end of the next block (its start is the cursor)
    verifying: Array  # bool: the next block is a window
    window: Array  # int32: size of the next window
    advanced: Array  # int32: steps advanced by the finished windows (with their fallback)
    windows: Array  # int32: finished windows


def next_root_block(policy: RootPolicy, slot: Pool) -> RootBlock:
    """Where a root goes after a block (one slot): the next recursion block (a root without
    windows), or, after a window, a recursion block if the policy falls back, else the next
    window of the adapted size; after a fallback block, the window decided with it."""
    recursion_end = jnp.minimum(slot.cursor + policy.recursion_block, slot.stop)
    if policy.rule is None:
        return RootBlock(
            end=recursion_end,
            verifying=jnp.zeros_like(slot.verifying),
            window=slot.window,
            advanced=slot.advanced,
            windows=slot.windows,
        )
    window_ended = slot.verifying
    after = policy.after_window(
        slot.window,
        slot.advanced,
        slot.windows,
        slot.block_start,
        slot.cursor,
        slot.block_end,
        slot.stop,
    )
    fallback = window_ended & after.fallback
    window = jnp.where(window_ended, after.window, slot.window)
    return RootBlock(
        end=jnp.where(fallback, recursion_end, jnp.minimum(slot.cursor + window, slot.stop)),
        verifying=~fallback,
        window=window,
        advanced=jnp.where(window_ended, after.advanced, slot.advanced),
        windows=jnp.where(window_ended, after.windows, slot.windows),
    )


def write_window_rows(plan: Plan, rows, pool: Pool, in_block, slot_index, step, reduced):
    """Store scored target rows of root windows in the per-draw verification buffers."""
    if plan.policy.rule is None:
        return rows
    position = jnp.clip(step - pool.block_start[slot_index], 0, plan.window_size - 1)
    row_target = jnp.where(
        in_block & pool.verifying[slot_index], pool.draw[slot_index], plan.num_draws
    )
    return jax.tree.map(
        lambda buffer, row: buffer.at[row_target, position].set(row, mode="drop"), rows, reduced
    )


def verify_windows(context: Context, pool: Pool, rows, ready: Array) -> tuple[Pool, Array]:
    """Verify the scored root windows ``ready`` (up to ``verify_lanes`` of them): keep the
    longest valid prefix plus a corrected step (:mod:`numpyro_autospec.verification`).  The
    target rows of steps ``a+1..`` were stored per draw by the rounds; row ``a`` is recomputed
    from ``O_a`` (the same value the speculation used)."""
    plan, process = context.plan, context.process
    num_slots, window_size = plan.num_slots, plan.window_size
    (slot_index,) = jnp.nonzero(ready, size=plan.verify_lanes, fill_value=num_slots)

    def verify_one(slot: Pool, target_rows) -> Pool:
        _, key_verify = jax.random.split(block_key(slot))
        length = slot.block_end - slot.block_start
        steps = jnp.minimum(slot.block_start + jnp.arange(window_size), slot.block_end - 1)
        first = process.reduce(slot.x, slot.block_start, slot.answer)
        target_rows = jax.tree.map(lambda buffer, row: buffer.at[0].set(row), target_rows, first)
        draft_rows = jax.vmap(process.spec_reduce, (None, None, 0, None))(
            slot.x, slot.block_start, steps, slot.answer
        )
        values = jax.vmap(process.step_value, (None, 0))(slot.x, steps)
        verdict = VERIFIERS[plan.policy.rule](key_verify, target_rows, draft_rows, values, length)
        full = verdict.kept == length
        corrected = process.set_step_value(
            slot.x,
            jnp.minimum(slot.block_start + verdict.kept, slot.block_end - 1),
            verdict.correction,
        )
        return slot._replace(
            status=jnp.full_like(slot.status, Status.BLOCK_DONE),
            x=select(full, slot.x, corrected),
            cursor=jnp.where(full, slot.block_end, slot.block_start + verdict.kept + 1),
            has_next=slot.has_next & full,
        )

    def verify(pool: Pool) -> Pool:
        slots = gather(pool, jnp.minimum(slot_index, num_slots - 1))
        draw_rows = gather(rows, slots.draw)
        verified = jax.vmap(verify_one)(slots, draw_rows)
        # write back the fields verification changes only: the answers stay in place
        changed = ("status", "x", "cursor", "has_next")
        return pool._replace(
            **{
                name: scatter(getattr(pool, name), slot_index, getattr(verified, name))
                for name in changed
            }
        )

    return jax.lax.cond(jnp.any(ready), verify, lambda pool: pool, pool), jnp.any(ready)
