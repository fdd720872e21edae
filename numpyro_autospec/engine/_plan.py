"""The static plan of a run (trace time): ``D`` roots (slots ``0..D-1``), ``T`` trial slots
(docs/algorithm.md, sections 3-4), and a round's units of one oracle evaluation (a query, or a
block-form call of ``unit_rows`` rows), evaluated ``chunk`` at a time."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from numpyro_autospec._core.rejection import batch_size
from numpyro_autospec._core.root_policy import RootPolicy
from numpyro_autospec.config import Capacity, SamplerConfig
from numpyro_autospec.engine._pool import Layout, layout
from numpyro_autospec.engine._sharding import check_mesh
from numpyro_autospec.errors import ConfigError, positive_integer
from numpyro_autospec.processes._base import has_discrete_steps

__all__ = ["RECURSION_ROOT_SLOTS", "Plan", "plan", "nbytes"]

#: smallest default number of trial slots when roots are made of recursion blocks (trials
#: that do not fit wait for slots: more rounds, same draws)
RECURSION_ROOT_SLOTS = 512

#: bytes one pass of the transitions may gather per lane-set when sizes are chosen by default
LANE_BYTES = 1 << 20
#: pools of at most this many slots, and bytes of lanes, advance every slot each pass
EVERY_SLOT = 64
EVERY_SLOT_BYTES = 1 << 16
#: at most this many lanes by default (a pass counts pairwise over its lanes)
MAX_LANES = 256


class Plan(NamedTuple):
    """Static (trace-time) sizes and tables of a run."""

    num_steps: int
    policy: RootPolicy
    num_draws: int  # D: roots, slots 0..D-1
    num_slots: int  # D + T: every slot
    lanes: int  # slots advanced per pass (num_slots: every slot, no compaction)
    spawn_lanes: int  # trials spawned per pass
    block_mode: bool  # units are block-form calls of unit_rows conditionals
    unit_rows: int  # scoring rows per block-form unit; 1 without block mode
    answer_rows: int  # R: rows of a speculation answer
    window_size: int  # W: rows of a root's verification buffer (1: no windows)
    chunk: int  # units per batched oracle call
    max_units: int  # units per round
    final_query: bool
    depth: np.ndarray  # depth[m]: nesting levels of residual trials below a block of m steps
    batch_sizes: np.ndarray  # trials of residual batch r
    max_passes: int
    state_layout: Layout  # how the pool stores process states
    mesh: Mesh | None = None


def nbytes(tree) -> int:
    """Bytes of the arrays (or shapes) of a pytree."""
    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def _optional(value, label: str, minimum: int = 1) -> int | None:
    if value is None:
        return None
    return positive_integer(value, label, ConfigError) if minimum else int(value)


def plan(process, config: SamplerConfig, capacity: Capacity, num_draws: int, key_like) -> Plan:
    """Resolve the static sizes of a run of ``num_draws`` draws."""
    config = config.validate()
    if not isinstance(capacity, Capacity):
        raise ConfigError(f"capacity must be a Capacity, got {type(capacity).__name__}")
    mesh = check_mesh(capacity.mesh)
    num_steps = int(process.num_steps)
    discrete = has_discrete_steps(process)
    policy = config.root_policy(num_steps, discrete)
    recursion_block = policy.recursion_block
    windows = policy.rule is not None
    window_size = policy.max_window if windows else 1
    answer_rows = policy.answer_rows

    depth = np.zeros(recursion_block + 2, np.int32)
    for length in range(recursion_block + 2):
        depth[length] = 0 if length <= policy.leaf_size else 1 + depth[(length + 1) // 2]
    root_need = int(depth[recursion_block])

    block_mode = bool(process.scores_blocks)
    if block_mode and process.final_query:
        raise ConfigError("a process that scores blocks cannot need a final query")
    x_shape = jax.eval_shape(process.init, key_like)
    answer_shape = jax.eval_shape(lambda x: process.query(x, 0, answer_rows), x_shape)
    # a slot holds its state and two answers (its block's and the lookahead)
    slot_bytes = nbytes(x_shape) + 2 * nbytes(answer_shape) + 256

    trials = _optional(capacity.num_slots, "capacity.num_slots")
    if trials is None:
        wanted = num_draws * 4 * root_need
        if policy.rule is None and root_need > 0:
            wanted = max(wanted, RECURSION_ROOT_SLOTS)
        affordable = capacity.memory_budget // slot_bytes - num_draws
        trials = max(root_need, min(wanted, affordable, 8192))
    elif trials < root_need:
        raise ConfigError(
            f"capacity.num_slots={trials} is too small: recursion blocks of "
            f"{recursion_block} steps nest {root_need} levels of residual trials: at least "
            f"{root_need} slots are needed"
        )
    num_slots = num_draws + trials

    lanes = _optional(capacity.max_transitions, "capacity.max_transitions")
    if lanes is None:
        # every slot of a small pool, else the slots an event reached, about LANE_BYTES
        lane_bytes = slot_bytes + (nbytes(answer_shape) if windows else 0)
        if num_slots <= EVERY_SLOT and num_slots * lane_bytes <= EVERY_SLOT_BYTES:
            lanes = num_slots
        else:
            lanes = min(MAX_LANES, max(2, LANE_BYTES // lane_bytes), max(2, 2 * num_draws))
    lanes = max(1, min(int(lanes), num_slots))
    spawn_lanes = max(1, min(lanes, trials))

    rows_per_call = None
    if block_mode:
        # a slot's scoring rows in one call, unless capped by ``rows_per_call``
        longest_block = max(window_size, recursion_block, 1)
        unit_rows = max(1, longest_block - 1)
        rows_per_call = process.rows_per_call
        if rows_per_call is not None:
            unit_rows = min(
                unit_rows, positive_integer(rows_per_call, "rows_per_call", ConfigError)
            )
    else:
        unit_rows = 1
    chunk = _optional(capacity.chunk_size, "capacity.chunk_size")
    if chunk is None:
        if not block_mode:
            chunk = 32
        elif rows_per_call is not None:
            # about a round's scoring units, at most 8 (padded lanes are real work on a CPU)
            typical = max(policy.first_window if windows else 0, recursion_block, 2) - 1
            chunk = max(1, min(8, num_draws * -(-typical // unit_rows)))
        else:
            chunk = max(1, min(num_draws, 4))
        if mesh is not None:
            chunk = max(chunk, mesh.size)
    max_units = _optional(capacity.max_queries, "capacity.max_queries")
    if max_units is None:
        max_units = 1 << 30

    batch_sizes = np.array(
        [min(batch_size(r, policy.growth), 1 << 24) for r in range(64)], dtype=np.int32
    )
    max_passes = 64 * (num_steps + 2) * max(1, num_draws) + 4096
    return Plan(
        num_steps=num_steps,
        policy=policy,
        num_draws=num_draws,
        num_slots=num_slots,
        lanes=lanes,
        spawn_lanes=spawn_lanes,
        block_mode=block_mode,
        unit_rows=unit_rows,
        answer_rows=answer_rows,
        window_size=window_size,
        chunk=chunk,
        max_units=max_units,
        final_query=bool(process.final_query),
        depth=depth,
        batch_sizes=batch_sizes,
        max_passes=max_passes,
        state_layout=layout(x_shape),
        mesh=mesh,
    )
