"""Running sums and compaction over the slots as fused pairwise reductions (one or two XLA
kernels each, where ``cumsum``/``searchsorted`` take several); long axes keep those."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

__all__ = ["running_sum", "count_at_most", "first_true", "expand_demand", "segment_total"]

#: axes longer than this take ``jnp.cumsum`` and a binary search (pairwise is ``O(n^2)``)
PAIRWISE = 128


def running_sum(values: Array) -> Array:
    """The inclusive running sum of ``values`` along its first axis.

    >>> import jax.numpy as jnp
    >>> running_sum(jnp.array([1, 0, 2, 3])).tolist()
    [1, 1, 3, 6]
    >>> running_sum(jnp.array([[1, 2], [3, 4]])).tolist()
    [[1, 2], [4, 6]]
    """
    values = jnp.asarray(values)
    size = values.shape[0]
    if size > PAIRWISE:
        return jnp.cumsum(values, axis=0)
    index = jnp.arange(size)
    lower = (index[None, :] <= index[:, None]).reshape((size, size) + (1,) * (values.ndim - 1))
    return jnp.sum(jnp.where(lower, values[None], 0), axis=1)


def segment_total(values: Array, segments: Array, count: int) -> Array:
    """``jax.ops.segment_sum(values, segments, count)``, ids outside ``0..count-1`` dropped.

    >>> import jax.numpy as jnp
    >>> segment_total(jnp.array([1, 2, 3, 4]), jnp.array([0, 2, 0, 5]), 3).tolist()
    [4, 0, 2]
    """
    values = jnp.asarray(values)
    if values.shape[0] * count > PAIRWISE * PAIRWISE:
        return jax.ops.segment_sum(values, segments, count + 1)[:count]
    match = segments[None, :] == jnp.arange(count)[:, None]
    match = match.reshape(match.shape + (1,) * (values.ndim - 1))
    return jnp.sum(jnp.where(match, values[None], 0), axis=1)


def count_at_most(cumulative: Array, items: Array) -> Array:
    """``jnp.searchsorted(cumulative, items, side="right")``: the slot each item falls in.

    >>> import jax.numpy as jnp
    >>> count_at_most(jnp.array([2, 2, 3]), jnp.arange(4)).tolist()
    [0, 0, 2, 3]
    """
    if cumulative.shape[0] > PAIRWISE:
        found = jnp.searchsorted(cumulative, items, side="right", method="scan_unrolled")
        return found.astype(jnp.int32)
    return jnp.sum(cumulative[None, :] <= items[:, None], axis=1).astype(jnp.int32)


def first_true(mask: Array, count: int) -> Array:
    """The indices of the first ``count`` true entries of ``mask``, padded with ``len(mask)``.

    >>> import jax.numpy as jnp
    >>> first_true(jnp.array([False, True, True, False, True]), 2).tolist()
    [1, 2]
    >>> first_true(jnp.array([False, True]), 3).tolist()
    [1, 2, 2]
    """
    return count_at_most(running_sum(mask.astype(jnp.int32)), jnp.arange(count))


def expand_demand(demand: Array, count: int) -> tuple[Array, Array, Array]:
    """The first ``count`` items of ``demand`` (items per slot) laid end to end: each item's
    slot, its offset in the slot, and whether it exists.

    >>> import jax.numpy as jnp
    >>> owner, offset, exists = expand_demand(jnp.array([2, 0, 1]), 4)
    >>> owner.tolist(), offset.tolist(), exists.tolist()
    ([0, 0, 2, 2], [0, 1, 0, 1], [True, True, True, False])
    """
    cumulative = running_sum(demand)
    item = jnp.arange(count)
    owner = jnp.minimum(count_at_most(cumulative, item), demand.shape[0] - 1)
    offset = item - (cumulative[owner] - demand[owner])
    return owner, offset.astype(jnp.int32), item < cumulative[-1]
