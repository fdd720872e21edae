"""The engine's pool of tasks: a fixed number of slots, each running one task, as a few packed
arrays.

A *task* drives a range ``[start, stop)`` of steps of one draw through a sequence of blocks:

* the **root** of draw ``d`` (slot ``d``) drives ``[0, N)`` in windows and recursion blocks, as
  its :class:`~numpyro_autospec._core.root_policy.RootPolicy` says;
* a **residual trial** of a block ``[a, a+m)`` drives that range in two blocks, the halves
  ``[a, a + ceil(m/2))`` and ``[a + ceil(m/2), a + m)`` (docs/algorithm.md, section 3).

Each block is a leaf (sequential steps), a recursion block (speculation, scoring, and on
rejection a residual loop whose trials are tasks in other slots) or, at the root, a window
(speculation, scoring and verification).  ``status`` says what the task waits for.

The integer fields of every slot live in one ``int32[S, F]`` array and the two log-densities in
one ``float32[S, 2]`` array, so that a transition of every slot is one fused select, not one per
field; :class:`Meta` and :class:`Scores` are their column views.  Each slot also holds its
process state ``x`` (one flat buffer per dtype, :class:`Layout`), three keys, and two answer
buffers (its block's speculation answer and the lookahead), written only by the rounds and by
reports.  Tasks are linked by slot index plus an ``epoch`` that changes whenever a slot is
freed or starts a new residual loop, so that stale trials recognise themselves as orphans.
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
    """Slot states.  Queries: ``NEED_ANSWER``, ``LEAF`` without an answer, ``SCORING``,
    ``NEED_FINAL``.  Events (a pass of the transitions moves them): ``START``, ``LEAF`` with an
    answer, ``SCORED``, ``BLOCK_DONE``.  ``WAITING`` waits for residual trials, ``DONE`` is a
    finished root, ``FREE`` an empty slot (or a root not yet admitted)."""

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
    """How a process state (a pytree of arrays) is stored in the pool: its leaves raveled and
    laid end to end, one buffer per dtype, so that moving a slot's state (a gather, a scatter,
    a masked select) is one operation per dtype, not one per leaf."""

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
    """The columns of ``view`` stacked along the last axis (a column given as a Python number
    is that constant in every row)."""
    return _written(None, view, [True] * len(view))


def repack(rows: Array, old: NamedTuple, new: NamedTuple) -> Array:
    """``pack(new)``, given ``rows = pack(old)``: only the columns of ``new`` that are not
    ``old``'s (the same arrays) are written, the rest stays as it is in ``rows``."""
    return _written(rows, new, [a is not b for a, b in zip(new, old, strict=True)])


def _written(base: Array | None, view: NamedTuple, written: list[bool]) -> Array:
    """``base`` with the ``written`` columns of ``view``: the arrays in one stack, the Python
    numbers from one constant row, then one select (``None``: nothing to keep)."""
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
    """``new`` where ``condition``, else ``old``, leaf by leaf (``condition`` broadcast from
    the left over trailing axes); a leaf ``new`` shares with ``old`` is returned as is."""

    def select(a, b):
        if a is b:
            return a
        c = jnp.reshape(
            condition, jnp.shape(condition) + (1,) * (jnp.ndim(b) - jnp.ndim(condition))
        )
        return jnp.where(c, a, b)

    return jax.tree.map(select, new, old)
