"""The engine's pool: a fixed number of slots, each running one *task*, as packed arrays.

A task drives steps ``[start, stop)`` of one draw through blocks: the **root** of draw ``d``
(slot ``d``) drives ``[0, N)`` by its ``RootPolicy``, a **residual trial** of a block drives
its two halves (docs/algorithm.md, section 3).  Integer fields are rows of one ``int32[S, F]``
array (:class:`Meta`), so a transition is one fused select.  Tasks link by slot plus an
``epoch``, changed when a slot is freed or starts a residual loop, so stale trials are orphans.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = [
    "Status",
    "Meta",
    "Scores",
    "Pool",
    "NO_TRIAL",
    "Layout",
    "layout",
    "flatten",
    "unflatten",
    "pack",
    "repack",
    "unpack",
    "choose",
]

#: "no accepted trial yet"
NO_TRIAL = 2**30


class Status:
    """Slot states: ``NEED_*``, ``SCORING`` and an unanswered ``LEAF`` wait for a round,
    ``WAITING`` for residual trials; ``DONE`` and ``FREE`` (empty, or a root not yet admitted)
    are idle; the others are events, which a pass moves."""

    FREE = 0
    START = 1  # a block is set up: leaf, speculation (answer known) or a query for O_a
    NEED_ANSWER = 2  # waits for the speculation answer at block_start
    LEAF = 3  # sequential steps, one query each (has_answer: the step's answer is there)
    SCORING = 4  # waits for the scoring rows of a speculated block (and the lookahead)
    SCORED = 5  # scored: verify a window, or accept a recursion block or start its residual
    WAITING = 6  # waits for residual trials
    BLOCK_DONE = 7  # the block is finished: move on to the next block
    NEED_FINAL = 8  # a root waits for query(x, N)
    DONE = 9  # a finished root
    FINISHED = 10  # a finished trial: its residual test, then its report


class Meta(NamedTuple):
    """The integer fields of a slot (columns of one ``int32[S, F]`` array)."""

    status: Array
    draw: Array  # the draw the task belongs to
    parent: Array  # parent slot, -1 for a root
    parent_epoch: Array  # the parent's epoch when this trial was spawned
    epoch: Array
    trial: Array  # global trial index in the parent's residual loop
    start: Array  # the task's range [start, stop)
    stop: Array
    max_block: Array  # largest block the task may run (deadlock-free admission)
    block_index: Array  # index of the current block in the range
    block_start: Array
    block_end: Array
    cursor: Array  # next step of a leaf; after a block, the end of its kept prefix
    served: Array  # items of the current query already answered
    has_answer: Array  # the current block's speculation answer (or the leaf step's) is known
    has_next: Array  # the lookahead at block_end is known
    owner: Array  # the slot whose buffer holds the current answer (a trial reads its parent's)
    buffer: Array  # which of the owner's two buffers
    verifying: Array  # the current block is a root window
    window: Array  # root: size of the current (then next) window
    advanced: Array  # root: steps advanced by finished windows (with their fallback)
    windows: Array  # root: finished windows
    trial_next: Array  # next trial to spawn
    batch: Array  # residual batch r
    batch_end: Array  # trials of batch r are [.., batch_end)
    best_trial: Array  # smallest accepted trial so far (NO_TRIAL: none)
    tail_rows: Array  # trial: rows of the lookahead at the range's end
    next_rows: Array  # rows of the block after the current one (what its lookahead answers)


class Scores(NamedTuple):
    """The float fields of a slot (columns of one ``float32[S, 2]`` array)."""

    log_mu_block: Array  # target log-density of the current block's steps
    log_mu_total: Array  # target log-density of the finished blocks of the range


class Pool(NamedTuple):
    meta: Array  # int32[S, len(Meta._fields)]
    scores: Array  # float32[S, 2]
    keys: Array  # key[S, 3]: root: (run key, -, -); trial: (left half, right half, accept)
    x: tuple  # process states, one buffer per dtype (:class:`Layout`), leading axis S
    answers: Any  # speculation answers, leading axes [S, 2]


class Layout(NamedTuple):
    """How the pool stores a process state: its leaves raveled end to end, one buffer per dtype
    (one gather, scatter or select per dtype, not per leaf)."""

    treedef: Any
    shapes: tuple  # each leaf's shape
    dtypes: tuple  # the buffers' dtypes
    places: tuple  # each leaf's (buffer, offset, size)


def layout(tree_like) -> Layout:
    """The :class:`Layout` of trees shaped like ``tree_like`` (arrays or shapes)."""
    leaves, treedef = jax.tree.flatten(tree_like)
    dtypes: list = []
    sizes: list[int] = []
    places = []
    for leaf in leaves:
        dtype = jnp.dtype(leaf.dtype)
        if dtype not in dtypes:
            dtypes.append(dtype)
            sizes.append(0)
        group = dtypes.index(dtype)
        size = math.prod(leaf.shape)
        places.append((group, sizes[group], size))
        sizes[group] += size
    shapes = tuple(tuple(leaf.shape) for leaf in leaves)
    return Layout(treedef, shapes, tuple(dtypes), tuple(places))


def flatten(layout: Layout, tree, lead: int = 0) -> tuple:
    """The buffers of ``tree`` (``lead`` leading batch axes on every leaf)."""
    leaves = jax.tree.leaves(tree)
    groups: list[list] = [[] for _ in layout.dtypes]
    for leaf, (group, _, _) in zip(leaves, layout.places, strict=True):
        groups[group].append(jnp.reshape(leaf, jnp.shape(leaf)[:lead] + (-1,)))
    return tuple(
        parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1) for parts in groups
    )


def unflatten(layout: Layout, buffers: tuple, lead: int = 0):
    """The tree stored in ``buffers`` (``lead`` leading batch axes)."""
    leaves = []
    for shape, (group, offset, size) in zip(layout.shapes, layout.places, strict=True):
        buffer = buffers[group]
        part = buffer if size == buffer.shape[-1] else buffer[..., offset : offset + size]
        leaves.append(jnp.reshape(part, buffer.shape[:lead] + shape))
    return jax.tree.unflatten(layout.treedef, leaves)


def pack(view: NamedTuple) -> Array:
    """The columns of ``view`` stacked along the last axis (a Python number: a constant)."""
    return _written(None, view, [True] * len(view))


def repack(rows: Array, old: NamedTuple, new: NamedTuple) -> Array:
    """``pack(new)`` given ``rows = pack(old)``, writing only the columns that changed."""
    return _written(rows, new, [a is not b for a, b in zip(new, old, strict=True)])


def _written(base: Array | None, view: NamedTuple, written: list[bool]) -> Array:
    """``base`` (or nothing) with the ``written`` columns of ``view``, in one select."""
    numbers = np.array(
        [w and isinstance(c, int | float) for c, w in zip(view, written, strict=True)]
    )
    arrays = np.array(written) & ~numbers
    if not arrays.any() and not numbers.any():
        return base
    columns = [jnp.asarray(column) for column, keep in zip(view, arrays, strict=True) if keep]
    dtype = base.dtype if base is not None else jnp.result_type(*columns, *view)
    if base is not None:
        shape = base.shape[:-1]
    else:
        shape = jnp.broadcast_shapes(*(column.shape for column in columns))
    constants = np.array(
        [c if number else 0 for c, number in zip(view, numbers, strict=True)], dtype
    )
    out = jnp.asarray(constants) if base is None else jnp.where(numbers, constants, base)
    if not arrays.any():
        return jnp.broadcast_to(out, shape + (len(view),))
    stacked = jnp.stack([jnp.broadcast_to(c.astype(dtype), shape) for c in columns], axis=-1)
    if arrays.all():
        return stacked
    place = np.maximum(np.cumsum(arrays) - 1, 0)
    return jnp.where(arrays, stacked[..., place], out)


def unpack(cls, array: Array):
    """The column view ``cls`` of a packed array."""
    return cls(*jnp.unstack(array, axis=-1))


def choose(condition, new, old):
    """``new`` where ``condition`` (broadcast from the left), else ``old``, leaf by leaf."""

    def select(a, b):
        if a is b:
            return a
        c = jnp.reshape(
            condition, jnp.shape(condition) + (1,) * (jnp.ndim(b) - jnp.ndim(condition))
        )
        return jnp.where(c, a, b)

    return jax.tree.map(select, new, old)
