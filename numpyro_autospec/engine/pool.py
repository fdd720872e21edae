"""The task pool of the round scheduler: a fixed number of slots, each running one task.

A *task* drives a range ``[start, stop)`` of steps of one draw through a sequence of blocks:

* the **root** task of a draw drives ``[0, N)`` in windows and recursion blocks, as its
  :class:`~numpyro_autospec.config.RootPolicy` says;
* a **residual trial** of a block ``[a, a+m)`` drives that range in two blocks, the halves
  ``[a, a + ceil(m/2))`` and ``[a + ceil(m/2), a + m)`` (docs/algorithm.md, section 3).

Each block is sampled by a leaf (sequential steps), by speculation + scoring + (on rejection)
a residual loop whose trials are child tasks in other slots (a *recursion block*), or, at the
root only, by speculation + scoring + token or block verification (a *window*; the scored rows
live in per-draw buffers of the scheduler, not in the slots).  The slot's ``status`` says
what the task waits for.

Everything is a fixed-shape array with a leading slot axis, so the scheduler is one compiled
``lax.while_loop``; tasks are linked by slot index plus an ``epoch`` counter that changes
whenever a slot is freed, reallocated or starts a new wait, so that stale children (trials of
a resolved batch, descendants of cancelled trials) recognise themselves as orphans.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

__all__ = [
    "Status",
    "Pool",
    "NO_TRIAL",
    "empty_pool",
    "gather",
    "scatter",
    "block_key",
    "expand_demand",
]

#: "no accepted trial yet"
NO_TRIAL = 2**30


class Status:
    """Slot states.  Query states: ``NEED_ANSWER``, ``LEAF`` (without an answer), ``SCORING``
    (with queries left), ``NEED_FINAL``, ``ENUMERATE``.  Transient states are advanced between
    rounds."""

    FREE = 0
    START = 1  # a block is set up; decide leaf / speculate / ask for O_a
    NEED_ANSWER = 2  # waits for query(x, cursor)
    LEAF = 3  # sequential steps; queries one step at a time
    SCORING = 4  # waits for the target queries of a speculated block
    WAITING = 5  # waits for residual trials (child tasks)
    BLOCK_DONE = 6  # the current block is finished; advance the driver
    FINISHED = 7  # the whole range is finished
    REPORT = 8  # a finished trial reports (accepted or not) to its parent
    NEED_FINAL = 9  # a root waits for query(x, N) (processes with a final query)
    COMPLETE = 10  # a root's output is ready to be written
    SPECULATE = 11  # a block with its O_a known waits for its speculation
    ENUMERATE = 12  # a rejected block waits for its residual's enumeration round


class Pool(NamedTuple):
    """Per-slot fields (leading axis: slot), flat (one array per field, so that a transition
    gathers, changes and scatters back only what it touches), in groups:

    * **task and links**: ``status``, ``draw``, ``parent``, ``parent_epoch``, ``epoch``,
      ``trial``;
    * **keys** (:func:`block_key`): ``key_first``, ``key_second``, ``key_accept``,
      ``key_residual``;
    * **range and blocks**: ``start``, ``stop``, ``max_block``, ``block_index``,
      ``block_start``, ``block_end``, ``cursor``;
    * **state and answers**: ``x``, ``answer``/``has_answer``, ``answer_next``/``has_next``,
      ``answer_parent``;
    * **scoring**: ``log_mu_block``, ``log_mu_total``, ``score_next``, ``score_end``;
    * **root windows** (:mod:`numpyro_autospec.engine.windows`): ``verifying``, ``window``,
      ``advanced``, ``windows``;
    * **residual loop** (:mod:`numpyro_autospec.engine.trials`): ``trial_next``, ``batch``,
      ``batch_end``, ``best_trial``, ``report_accept``.
    """

    # task and links
    status: Array  # int32
    draw: Array  # int32: which draw the task belongs to
    parent: Array  # int32: parent slot, -1 for a root
    parent_epoch: Array  # int32: parent's epoch when this trial was spawned
    epoch: Array  # int32
    trial: Array  # int32: global trial index within the parent's residual loop
    # keys
    key_first: Array  # root: run key; trial: key of its left half
    key_second: Array  # trial: key of its right half
    key_accept: Array  # trial: key of its residual acceptance
    key_residual: Array  # key of the current block's residual trials
    # range and blocks
    start: Array  # int32: range driven by the task
    stop: Array  # int32
    max_block: Array  # int32: largest block this task may run (deadlock-free admission)
    block_index: Array  # int32: index of the current block within the range
    block_start: Array  # int32
    block_end: Array  # int32
    cursor: Array  # int32: next step (leaf progress; after BLOCK_DONE: end of kept prefix)
    # state and answers
    x: Any  # process state pytree
    answer: Any  # query(x, cursor) when has_answer
    has_answer: Array  # bool
    answer_next: Any  # query(x, block_end) (lookahead) when has_next
    has_next: Array  # bool
    #: trial: the parent's O_a (its speculation), for the residual test; only the leading
    #: rows a recursion block reads (:func:`~numpyro_autospec.engine.state.block_answer`)
    answer_parent: Any
    # scoring
    log_mu_block: Array  # float: target log-density of the current block
    log_mu_total: Array  # float: target log-density of the finished blocks of the range
    score_next: Array  # int32: next step to query while SCORING
    score_end: Array  # int32: SCORING ends when score_next reaches it
    # root windows
    verifying: Array  # bool: the current block is a root window (verified, no residual loop)
    window: Array  # int32: root: size of the current (then next) window
    advanced: Array  # int32: root: steps advanced by the finished windows (with their fallback)
    windows: Array  # int32: root: number of finished windows
    # residual loop
    trial_next: Array  # int32: next trial to spawn
    batch: Array  # int32: residual batch index r
    batch_end: Array  # int32: trials of batch r are [.., batch_end)
    best_trial: Array  # int32: smallest accepted trial index so far (NO_TRIAL if none)
    report_accept: Array  # bool: a REPORTing trial's residual acceptance


def empty_pool(num_slots: int, key_like: Array, x_like, answer_like, block_answer_like) -> Pool:
    """A pool of free slots; ``*_like`` are single-slot examples of each pytree field
    (``block_answer_like``: of ``answer_parent``, the leading part of an answer that a
    recursion block reads)."""

    def tile(tree):
        return jax.tree.map(
            lambda leaf: jnp.zeros((num_slots,) + jnp.shape(leaf), leaf.dtype), tree
        )

    zeros = jnp.zeros(num_slots, jnp.int32)
    keys = jnp.broadcast_to(key_like, (num_slots,) + key_like.shape)
    return Pool(
        status=zeros,
        draw=zeros,
        parent=zeros - 1,
        parent_epoch=zeros,
        epoch=zeros,
        trial=zeros,
        key_first=keys,
        key_second=keys,
        key_accept=keys,
        key_residual=keys,
        start=zeros,
        stop=zeros,
        max_block=zeros,
        block_index=zeros,
        block_start=zeros,
        block_end=zeros,
        cursor=zeros,
        x=tile(x_like),
        answer=tile(answer_like),
        has_answer=jnp.zeros(num_slots, bool),
        answer_next=tile(answer_like),
        has_next=jnp.zeros(num_slots, bool),
        answer_parent=tile(block_answer_like),
        log_mu_block=jnp.zeros(num_slots, jnp.float32),
        log_mu_total=jnp.zeros(num_slots, jnp.float32),
        score_next=zeros,
        score_end=zeros,
        verifying=jnp.zeros(num_slots, bool),
        window=zeros,
        advanced=zeros,
        windows=zeros,
        trial_next=zeros,
        batch=zeros,
        batch_end=zeros,
        best_trial=zeros + NO_TRIAL,
        report_accept=jnp.zeros(num_slots, bool),
    )


def gather(tree, index: Array):
    """Rows ``index`` of every leaf (out-of-range indices are clamped; mask the result)."""
    return jax.tree.map(lambda leaf: leaf[index], tree)


def scatter(tree, index: Array, values):
    """Write rows ``index`` of every leaf; out-of-range indices are dropped."""
    return jax.tree.map(lambda leaf, value: leaf.at[index].set(value, mode="drop"), tree, values)


def expand_demand(demand: Array, count: int) -> tuple[Array, Array, Array]:
    """The first ``count`` items of the slots' ``demand`` (items per slot) laid end to end:
    for each item its slot (an index into ``demand``), its offset among that slot's items, and
    whether it exists (``item < sum(demand)``).

    >>> import jax.numpy as jnp
    >>> owner, offset, exists = expand_demand(jnp.array([2, 0, 1]), 4)
    >>> owner.tolist(), offset.tolist(), exists.tolist()
    ([0, 0, 2, 2], [0, 1, 0, 1], [True, True, True, False])
    """
    cumulative = jnp.cumsum(demand)
    item = jnp.arange(count)
    # compare_all: one fusion, where the default scan is a while loop of log2(slots) steps
    owner = jnp.minimum(
        jnp.searchsorted(cumulative, item, side="right", method="compare_all"),
        demand.shape[0] - 1,
    )
    offset = item - (cumulative[owner] - demand[owner])
    return owner, offset, item < cumulative[-1]


def block_key(slot: Pool) -> Array:
    """The key of a slot's current block, as in :mod:`numpyro_autospec.reference`: block ``j``
    of a root uses ``fold_in(run key, j)``; a trial's left half uses its left key and its right
    half its right key."""
    root_key = jax.random.fold_in(slot.key_first, slot.block_index)
    trial_key = jnp.where(slot.block_index == 0, slot.key_first, slot.key_second)
    return jnp.where(slot.parent < 0, root_key, trial_key)
