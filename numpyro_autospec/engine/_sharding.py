"""Query batches across devices: a round's oracle batch split over a device mesh.

A round of the engine (:mod:`numpyro_autospec.engine._round`) evaluates the oracle on a batch
of independent queries: one lane per query, no lane reading another's answer
(docs/algorithm.md, section 1: the queries of a round are the parallel work of the sampler).
With a mesh in :class:`~numpyro_autospec.engine.Capacity` (``Capacity(mesh=mesh)``),
:func:`sharded_batch` pads the batch axis to a multiple of the mesh size, constrains the
oracle's inputs and outputs to be split along that axis over every device of the mesh
(:func:`jax.lax.with_sharding_constraint`), so that XLA's SPMD partitioner runs each device's
share of the lanes on that device, and gathers the answers back to every device: the rest of
the scheduler (the pool, the keys, the acceptance tests) stays replicated.

Since every lane is computed by the same program from the same inputs, the answers, hence the
draws, rounds and queries, are those of the run on one device (``tests/engine/test_sharding.py``
compares them key for key).  The mesh is static: it is part of the compiled program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from numpyro_autospec.errors import ShardingError

__all__ = ["ShardingError", "check_mesh", "sharded_batch"]


def check_mesh(mesh: Any) -> Mesh | None:
    """``mesh`` if it can split a round's batch (``None``: one device, no sharding).

    :param mesh: a :class:`jax.sharding.Mesh` of any shape; the batch axis is split over all
        its axes together (``PartitionSpec(mesh.axis_names)``), so a 1-D mesh
        ``jax.make_mesh((jax.device_count(),), ("batch",))`` is the usual choice.
    :raises ShardingError: for anything else (a list of devices, an abstract mesh, a mesh
        without devices), naming the value.
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
    # the same devices with automatic axes: sharding constraints leave the partitioning of
    # everything else to XLA (jax.make_mesh makes explicit axes by default)
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def sharded_batch(mesh: Mesh | None, function: Callable, *batched: Any) -> Any:
    """``function(*batched)``, its batch (leading) axis split across the devices of ``mesh``.

    ``function`` maps batches to batches lane by lane (a ``vmap`` of the oracle query, or a
    process's batched form): lane ``i`` of the output depends on lane ``i`` of the inputs only
    (whatever else it reads, a closure, is replicated).  The batch of ``B`` lanes is padded to
    ``ceil(B / D) D`` lanes (``D = mesh.size``) with copies of lane 0, the inputs and outputs
    are constrained to ``NamedSharding(mesh, PartitionSpec(mesh.axis_names))``, and the first
    ``B`` lanes of the output are returned replicated.  With ``mesh=None``: ``function(*batched)``.

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
