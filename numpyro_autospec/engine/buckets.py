"""The batch sizes and row counts a plan compiles (docs/engine.md, "Capacities and memory").

Every batch size of an oracle call site (speculation lanes, single steps, recursion-block and
root-window scoring, residual enumeration) and every row count of a block-scoring call is one
more compiled copy of the oracle call and its scatters (``lax.switch`` in
:func:`numpyro_autospec.engine.rounds.bucketed`): a round runs in the smallest that holds its
demand.  :func:`buckets` chooses the sizes, stopping where a batch moves few bytes;
:func:`window_rows` and :func:`block_rows` the row counts; :func:`at_most` caps them at
:attr:`~numpyro_autospec.engine.plan.Capacity.max_buckets`; :func:`block_speculation` whether
recursion blocks speculate in a phase of their own.  None of them changes the draws.
"""

from __future__ import annotations

import numpy as np

from numpyro_autospec.config import RootPolicy

__all__ = [
    "SPLIT_BATCH_BYTES",
    "at_most",
    "block_rows",
    "block_speculation",
    "buckets",
    "window_rows",
]

#: a batch of queries that moves at most this many bytes (answers and gathered states) is not
#: split into smaller buckets: each bucket size is one more compiled copy of the oracle call and
#: its scatters (``lax.switch`` in :func:`numpyro_autospec.engine.rounds.bucketed`), which costs
#: compile time, while running such a batch at full size costs little
#: (``benchmarks/compile_time.py``, docs/benchmarks.md).
SPLIT_BATCH_BYTES = 1 << 18


def buckets(
    largest: int, smallest: int = 16, item_bytes: int = 0, factor: int = 4
) -> tuple[int, ...]:
    """Batch sizes ``largest, largest / factor, ...`` down to ``smallest`` (a round runs in the
    smallest that holds its demand), stopping at the first size whose batch moves at most
    :data:`SPLIT_BATCH_BYTES` when one item of the batch moves ``item_bytes`` (0: no such
    stop).  A small problem thus compiles one size per query shape, a large one keeps the
    sizes that save work."""
    sizes, size = [], max(1, int(largest))
    while True:
        sizes.append(size)
        if size <= smallest or 0 < size * item_bytes <= SPLIT_BATCH_BYTES:
            break
        size = max(smallest, size // factor)
    return tuple(sorted(set(sizes)))


def at_most(sizes: tuple[int, ...], limit: int | None) -> tuple[int, ...]:
    """At most ``limit`` of the ascending ``sizes``, evenly spaced among them, the largest
    always kept (it holds a round's whole demand) and the smallest whenever ``limit >= 2``;
    ``None``: all of them (:attr:`Capacity.max_buckets`).

    >>> at_most((31, 63, 127, 255, 511, 1023), 1), at_most((31, 63, 127, 255, 511, 1023), 3)
    ((1023,), (31, 127, 1023))
    >>> at_most((4, 16), 3), at_most((4, 16), None)
    ((4, 16), (4, 16))
    """
    if limit is None or len(sizes) <= limit:
        return sizes
    if limit == 1:
        return sizes[-1:]
    picks = np.round(np.linspace(0, len(sizes) - 1, limit)).astype(int)
    return tuple(sizes[i] for i in sorted(set(picks.tolist())))


def window_rows(policy: RootPolicy, row_bytes: int) -> tuple[int, ...]:
    """Row counts of the root windows' block-scoring calls: ``score_rows(True)``, then halved
    down to ``min_window - 1`` while a call of that many rows still moves more than
    :data:`SPLIT_BATCH_BYTES` (``row_bytes`` per row: a row of answer and a copy of the state,
    which the oracle reads once per row when its rows are computed independently, as
    Curie-Weiss's are).

    A window's scoring call runs in the smallest count that holds the longest window of its
    round (:func:`numpyro_autospec.engine.rounds.query_round`): an oracle whose cost grows
    with its rows (Curie-Weiss: :math:`O(n)` per row) does not pay ``max_window`` rows for a
    window of ``4 sqrt(N)`` steps.  Halving (not quartering) keeps the padding below 2x (the
    windows grow by ``window_growth = 8``: a window of ``8 * 256`` steps after one of 256
    kept whole fits 2047 rows, where quartering would take 4095).  The largest count is the
    reference's (:mod:`numpyro_autospec.reference`), so every row is computed from the same
    prefix; the draws do not depend on the count (``tests/engine/test_block_form.py``).

    >>> from numpyro_autospec.config import SamplerConfig
    >>> window_rows(SamplerConfig().root_policy(4096), 16 * 4096)
    (63, 127, 255, 511, 1023, 2047, 4095)
    >>> window_rows(SamplerConfig().root_policy(64), 16 * 64)
    (63,)
    """
    if policy.rule is None:
        return (policy.score_rows(True),)
    return buckets(policy.score_rows(True), max(1, policy.min_window - 1), row_bytes, factor=2)


def block_rows(policy: RootPolicy, row_bytes: int) -> tuple[int, ...]:
    """Row counts of the recursion blocks' block-scoring calls: ``score_rows(False)``, then
    halved down to 1 while a call of that many rows still moves more than
    :data:`SPLIT_BATCH_BYTES` (``row_bytes`` as in :func:`window_rows`).

    As for windows, a recursion block's scoring call runs in the smallest count that holds the
    longest recursion block of its round.  A residual trial of a block of ``m`` steps samples
    its halves as blocks of ``m/2``, ``m/4``, ... steps, so the blocks deep in a residual loop
    are far shorter than ``recursion_block``; before, each of them paid
    ``recursion_block - 1`` rows (31 at ``n = 4096``: an :math:`O(31 n)` Curie-Weiss call for a
    block of 2 steps, which needs one row).  The rows a block uses are the same, so the draws
    are too (``tests/engine/test_window_rows.py``).

    >>> from numpyro_autospec.config import SamplerConfig
    >>> block_rows(SamplerConfig().root_policy(4096), 16 * 4096)
    (3, 7, 15, 31)
    >>> block_rows(SamplerConfig().root_policy(64), 16 * 64)
    (3,)
    """
    return buckets(policy.score_rows(False), 1, row_bytes, factor=2)


def block_speculation(policy: RootPolicy, answer_bytes: int, max_transitions: int) -> bool:
    """Whether recursion blocks speculate in a transition phase of their own, from the leading
    ``recursion_block`` rows of their answers
    (:func:`numpyro_autospec.engine.state.block_answer`), apart from root windows, which need
    all ``answer_rows``.  A phase is one more compiled transition and one more pass per
    micro-step, so it is kept for roots with windows whose recursion blocks are shorter than the
    answers, and, as for bucket sizes, only when a phase's answers move more than
    :data:`SPLIT_BATCH_BYTES` (``max_transitions`` answers of ``answer_bytes``): Curie-Weiss
    at ``n = 4096`` (answers of 4096 rows, blocks of at most 32 steps) splits, ``n = 1024``
    does not.  The draws are the same either way.

    >>> from numpyro_autospec.config import SamplerConfig
    >>> policy = SamplerConfig().root_policy(4096)
    >>> block_speculation(policy, 4096 * 2 * 4, 16), block_speculation(policy, 1024 * 2 * 4, 16)
    (True, False)
    """
    shorter = policy.rule is not None and 0 < policy.recursion_block < policy.answer_rows
    return shorter and answer_bytes * max_transitions > SPLIT_BATCH_BYTES
