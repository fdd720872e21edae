"""A round's oracle batch split over a device mesh (``Capacity(mesh=mesh)``).

A round's queries are independent lanes (docs/algorithm.md, section 1), so the batch is split
over the mesh's devices by sharding constraints and gathered back; the rest of the scheduler
stays replicated, and the draws, rounds and queries are those of the run on one device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from numpyro_autospec.errors import ShardingError

__all__ = ["ShardingError", "check_mesh", "sharded_batch"]


def check_mesh(mesh: Any) -> Mesh | None:
    """``mesh`` (any shape: the batch is split over all its axes) with automatic axes, or
    ``None`` for one device.

    :raises ShardingError: for anything else, naming the value.
    """
    if mesh is None:
        return None
    if not isinstance(mesh, Mesh):
        raise ShardingError(
            f"capacity.mesh must be a jax.sharding.Mesh, e.g. "
            f"jax.make_mesh((jax.device_count(),), ('batch',)), or None; got "
            f"{type(mesh).__name__} {mesh!r}"
        )
    if mesh.devices.size == 0 or not mesh.axis_names:
        raise ShardingError(f"capacity.mesh has no devices or no axes: {mesh!r}")
    # automatic axes leave the partitioning of everything else to XLA
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def sharded_batch(mesh: Mesh | None, function: Callable, *batched: Any) -> Any:
    """``function(*batched)`` (lane by lane) with its leading axis split across ``mesh``: padded
    with copies of lane 0 to a multiple of ``mesh.size``, the result returned replicated.

    >>> import jax, jax.numpy as jnp
    >>> mesh = check_mesh(jax.make_mesh((jax.device_count(),), ("batch",)))
    >>> jax.jit(lambda x: sharded_batch(mesh, jax.vmap(jnp.square), x))(jnp.arange(5.0))
    Array([ 0.,  1.,  4.,  9., 16.], dtype=float32)
    """
    if mesh is None:
        return function(*batched)
    lanes = jax.tree.leaves(batched)[0].shape[0]
    padded = -(-lanes // mesh.size) * mesh.size
    split = NamedSharding(mesh, PartitionSpec(mesh.axis_names))
    replicated = NamedSharding(mesh, PartitionSpec())

    def pad(leaf):
        leaf = jnp.asarray(leaf)
        if padded == lanes:
            return leaf
        return jnp.concatenate([leaf, jnp.repeat(leaf[:1], padded - lanes, axis=0)])

    inputs = jax.lax.with_sharding_constraint(jax.tree.map(pad, batched), split)
    outputs = jax.lax.with_sharding_constraint(function(*inputs), split)
    return jax.lax.with_sharding_constraint(
        jax.tree.map(lambda leaf: leaf[:lanes], outputs), replicated
    )
