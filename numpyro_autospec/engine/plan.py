"""The static plan of a run: capacities, sizes, batch buckets and tables, resolved at trace time.

:func:`plan` turns a process, a :class:`~numpyro_autospec.config.SamplerConfig` and a
:class:`Capacity` into a :class:`Plan`: the root policy, the pool size (by default sized from the
memory budget), the query batch buckets, the nesting-depth table of recursion blocks (deadlock-free
admission, :mod:`numpyro_autospec.engine.trials`) and the residual batch sizes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from numpyro_autospec.config import RootPolicy, SamplerConfig
from numpyro_autospec.engine.buckets import (
    at_most,
    block_rows,
    block_speculation,
    buckets,
    window_rows,
)
from numpyro_autospec.engine.sharding import check_mesh
from numpyro_autospec.exceptions import ConfigError, positive_integer
from numpyro_autospec.processes.base import has_discrete_steps
from numpyro_autospec.rejection import batch_size

__all__ = ["RECURSION_ROOT_SLOTS", "Capacity", "Plan", "plan"]


#: smallest default pool when the root is made of recursion blocks.  Measured on stochastic
#: localization at N = 4096 (benchmarks/diffusion_rounds.py --num-slots, docs/diffusion.md):
#: with 50 slots (4 depth + 2) queued residual batches took the mean rounds to 734 (digits)
#: and 332 (mixture), with 512 slots to 169 and 150, same draws.
RECURSION_ROOT_SLOTS = 512


class Capacity(NamedTuple):
    """Capacity limits of the scheduler.  They may delay work (more rounds) but never change
    the draws.

    Attributes
    ----------
    num_slots:
        tasks held at once (pool size).  Default: ``4 depth + 2`` per draw (``depth``: nesting
        levels of residual trials below the largest recursion block; leaves and blocks whose
        residual is enumerated have none), at least :data:`RECURSION_ROOT_SLOTS` in all
        when the root is made of recursion blocks, capped by the memory budget and 8192.
    max_queries:
        oracle evaluations per round (the batch of one oracle call).  The batch is executed in
        the smallest of a few power-of-4 bucket sizes that holds the round's demand.
    max_transitions:
        tasks advanced per micro-step (bounds the per-micro-step gather/scatter work).
    memory_budget:
        bytes the pool and the query batch may use when sizes are chosen by default.
    mesh:
        a :class:`jax.sharding.Mesh` over which every round's oracle batch is split (its batch
        axis over all the mesh's axes, :mod:`numpyro_autospec.engine.sharding`); ``None`` (the
        default): no sharding constraint.  The draws, rounds and queries are the same.
    max_buckets:
        batch sizes (and row counts) compiled per oracle call site, at most.  Every size is
        one more compiled copy of the oracle call and its scatters: ``None`` (the default)
        keeps the sizes :func:`~numpyro_autospec.engine.buckets.buckets` gives, which save
        work on rounds of small demand;
        ``1`` compiles every call site once, at its largest size, and runs every round at
        that size: the quickest compilation where the sizes are many and a full-size call is
        cheap (Curie-Weiss ``n = 1024``, one draw: 9.0 s to the first draw instead of 11.7 s
        on a 2-core CPU), a slow draw where it is not (a diffusion's 512-slot pool: every
        round queries the denoiser 512 times; docs/benchmarks.md, "Fewer compiled sizes");
        ``k`` keeps ``k`` of them, the largest and the smallest among them
        (:func:`~numpyro_autospec.engine.buckets.at_most`).  The draws are the same.

    Example: a starved pool takes more rounds, never other draws.

    >>> import jax
    >>> from numpyro_autospec import engine
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 2)
    >>> ample = engine.run(process, keys)
    >>> starved = engine.run(process, keys, capacity=Capacity(num_slots=8, max_queries=2))
    >>> bool((ample.value == starved.value).all()), bool((starved.rounds >= ample.rounds).all())
    (True, True)
    """

    num_slots: int | None = None
    max_queries: int | None = None
    max_transitions: int | None = None
    memory_budget: int = 1 << 30
    mesh: Mesh | None = None
    max_buckets: int | None = None


class Plan(NamedTuple):
    """Static (trace-time) sizes and tables."""

    num_steps: int
    policy: RootPolicy  # how roots walk the steps (windows and/or recursion blocks)
    seq_block: int  # largest recursion block (0: none)
    window_size: int  # size of the per-draw verification buffers (1: no windows)
    verify_lanes: int  # root windows verified per micro-step
    lookahead: bool
    final_query: bool
    num_draws: int
    num_slots: int
    query_buckets: tuple[int, ...]  # batch sizes of single-step queries
    lane_buckets: tuple[int, ...]  # batch sizes of speculation queries
    block_buckets: tuple[int, ...]  # batch sizes of recursion-block scoring calls
    window_buckets: tuple[int, ...]  # batch sizes of root-window scoring calls
    window_rows: tuple[int, ...]  # row counts of root-window scoring calls (one per call)
    block_rows: tuple[int, ...]  # row counts of recursion-block scoring calls (one per call)
    answer_rows: int  # rows of a speculation answer
    #: leading rows of an answer that a recursion block reads (engine.state.block_answer):
    #: ``min(answer_rows, max(1, seq_block))``
    block_answer_rows: int
    #: recursion blocks speculate in a transition phase of their own, from the leading rows of
    #: their answers (engine.transitions.advance): when answers are large
    block_speculation: bool
    block_scoring: bool  # scoring steps of a block are one score_block call
    #: bounds of the speculation phases, increasing (engine.transitions.bounded_phases):
    #: blocks of at most ``speculation_lengths[0]`` steps are speculated, decided and finished
    #: on that many steps, the others on the next bound; ``()``: one phase, no bound
    speculation_lengths: tuple[int, ...]
    max_transitions: int
    #: batch sizes of the rejected blocks whose residual is enumerated in a round
    #: (engine.rounds.enumeration_round; usually one or two at a time)
    enumeration_buckets: tuple[int, ...]
    depth: np.ndarray  # depth[m]: nesting levels below a block of m steps
    batch_sizes: np.ndarray  # cumulative-free batch size table b_r
    max_rounds: int
    mesh: Mesh | None = None  # devices a round's oracle batch is split over (None: no split)


def speculation_lengths(process, recursion_block: int) -> tuple[int, ...]:
    """The bounds of the speculation phases of a process that declares
    ``bounded_speculation``
    (:class:`~numpyro_autospec.processes.base.BoundedSpeculationProcess`): blocks of at most
    ``W`` steps, ``W`` the smallest power of two at least ``sqrt(recursion_block)``, then all
    ``N`` steps.  Most speculated blocks are short (longer ones are almost always rejected and
    split, docs/algorithm.md section 3), so their speculations, decisions and residual tests
    cost ``W`` steps instead of the whole state's; each bound is one more compiled transition
    per phase, so there are two.  The draws are the same for any bounds.

    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes import DiffusionProcess
    >>> from numpyro_autospec.processes.time_grids import default_times
    >>> import jax.numpy as jnp
    >>> process = DiffusionProcess(PointCloudDenoiser(jnp.eye(2)), 2, default_times(1024, 50.0))
    >>> speculation_lengths(process, 1024), speculation_lengths(process, 100)
    ((32, 1024), (16, 1024))
    """
    num_steps = int(process.num_steps)
    if not process.bounded_speculation:
        return ()
    short = 1 << math.ceil(math.log2(math.sqrt(max(1, recursion_block))))
    return (short, num_steps) if short < num_steps else (num_steps,)


def has_batched_forms(process) -> bool:
    """Whether ``process`` declares the batched single-step forms ``query_batch`` and
    ``score_batch`` (declared by ``batched_queries = True``)."""
    return bool(process.batched_queries)


def nbytes(tree) -> int:
    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def plan(process, config: SamplerConfig, capacity: Capacity, num_draws: int, key_like) -> Plan:
    """Resolve the static sizes of a run.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.config import SamplerConfig
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    >>> sizes = plan(process, SamplerConfig(), Capacity(), 4, jax.random.PRNGKey(0))
    >>> sizes.num_steps, sizes.window_size, sizes.answer_rows, sizes.block_scoring
    (64, 64, 64, True)
    """
    config = config.validate()
    mesh = check_mesh(capacity.mesh)
    limit = capacity.max_buckets
    if limit is not None:
        limit = positive_integer(limit, "capacity.max_buckets", ConfigError)
    num_steps = int(process.num_steps)
    discrete = has_discrete_steps(process)
    policy = config.root_policy(num_steps, discrete, process.num_categories if discrete else 0)
    recursion_block = policy.recursion_block
    window = policy.max_window if policy.rule is not None else 1
    depth = np.zeros(recursion_block + 2, np.int32)
    for length in range(recursion_block + 2):
        # a leaf, or a block whose residual is enumerated, spawns no trials
        no_trials = length <= max(policy.leaf_size, policy.enumeration)
        depth[length] = 0 if no_trials else 1 + depth[(length + 1) // 2]
    root_need = int(depth[recursion_block])

    x_shape = jax.eval_shape(process.init, key_like)
    answer_rows = policy.answer_rows
    answer_shape = jax.eval_shape(lambda x: process.query(x, 0, answer_rows), x_shape)
    row_shape = jax.eval_shape(lambda x: process.query(x, 0, 1), x_shape)
    block_scoring = bool(process.scores_blocks)
    block_answer_rows = min(answer_rows, max(1, recursion_block))
    block_answer_shape = jax.eval_shape(lambda x: process.query(x, 0, block_answer_rows), x_shape)
    # a slot holds its answer, its lookahead and its parent's answer (the rows its recursion
    # block reads: engine.state.block_answer)
    slot_bytes = 2 * nbytes(answer_shape) + nbytes(block_answer_shape) + nbytes(x_shape) + 512
    minimum = root_need + 1
    if capacity.num_slots is None:
        wanted = num_draws * (4 * root_need + 2)
        if policy.rule is None and root_need > 0:
            # a root made of recursion blocks (diffusion, the paper's root): its residual
            # loops are the parallel work, and a batch that does not fit waits
            wanted = max(wanted, RECURSION_ROOT_SLOTS)
        affordable = max(minimum, capacity.memory_budget // (2 * slot_bytes))
        num_slots = max(minimum, min(wanted, affordable, 8192))
    else:
        num_slots = int(capacity.num_slots)
        if num_slots < minimum:
            raise ConfigError(
                f"capacity.num_slots={num_slots} is too small: recursion blocks of "
                f"{recursion_block} steps nest {root_need} levels of residual trials: at least "
                f"{minimum} slots are needed"
            )
    if capacity.max_queries is None:
        if block_scoring:
            # single-step queries are only leaf steps and final queries: one per slot at most
            demand = num_slots
        else:
            demand = num_slots * (recursion_block + 1) + min(num_draws, num_slots) * (window + 1)
        # a query holds its answer and, unless the process has batched forms, a copy of its
        # slot's state
        batched = has_batched_forms(process)
        query_bytes = nbytes(row_shape) + (0 if batched else nbytes(x_shape))
        affordable = max(1, capacity.memory_budget // (2 * max(1, query_bytes)))
        max_queries = max(1, min(demand, affordable, 1 << 16))
    else:
        max_queries = int(capacity.max_queries)
        if max_queries < 1:
            raise ConfigError(f"capacity.max_queries must be >= 1, got {max_queries}")
    # bytes one item of each batch moves: its answer and a copy of its slot's state.  A process
    # with batched forms reads the pool in place, so bytes do not measure its queries' work (a
    # denoiser over a whole point cloud per query): its single-step batches keep every size
    if has_batched_forms(process):
        query_buckets = buckets(max_queries)
    else:
        query_buckets = buckets(max_queries, item_bytes=nbytes(row_shape) + nbytes(x_shape))
    query_buckets = at_most(query_buckets, limit)
    if capacity.max_transitions is None:
        # every micro-step gathers max_transitions slots in each of its phases, whether they
        # move or not, and runs each transition on all of them, so max_transitions *
        # slot_bytes is per-micro-step memory traffic: keep it near 1 MiB, with 16 lanes
        # while they move at most 4 MiB and at least 2 lanes (docs/engine.md: 16 lanes ran
        # 7x faster than 288 at n = 1024, q = 2; at n = 1024, q = 98 a one-draw pool drew
        # 2.5x faster with 4 lanes than with 16)
        lanes = (1 << 20) // slot_bytes
        if lanes < 16:
            lanes = max(2, min(16, (4 << 20) // slot_bytes))
        max_transitions = max(1, min(num_slots, lanes))
    else:
        max_transitions = int(capacity.max_transitions)
        if max_transitions < 1:
            raise ConfigError(f"capacity.max_transitions must be >= 1, got {max_transitions}")
    verify_lanes = max(1, min(num_draws, max_transitions))

    def score_bytes(rows: int) -> int:
        """Bytes of one block-scoring call of ``rows`` rows and its gathered state."""
        return rows * nbytes(row_shape) + nbytes(x_shape)

    # root windows scored per round: every draw's window when memory allows (at most one per
    # draw at a time), not only the verify_lanes that one micro-step verifies -- the windows
    # scored in a round are verified over its micro-steps, and capping the scoring at
    # max_transitions would make a large pool of draws wait for rounds
    window_lanes = max(
        verify_lanes,
        min(num_draws, capacity.memory_budget // (2 * score_bytes(policy.score_rows(True)))),
    )
    batch_sizes = np.array(
        [min(batch_size(r, policy.growth), 1 << 24) for r in range(64)], dtype=np.int32
    )
    max_rounds = 64 * (num_steps + 2) * max(1, num_draws) + 1024
    return Plan(
        num_steps=num_steps,
        policy=policy,
        seq_block=recursion_block,
        window_size=window,
        verify_lanes=verify_lanes,
        lookahead=bool(config.lookahead),
        final_query=bool(process.final_query),
        num_draws=num_draws,
        num_slots=num_slots,
        query_buckets=query_buckets,
        lane_buckets=at_most(buckets(num_slots, 4, nbytes(answer_shape) + nbytes(x_shape)), limit),
        block_buckets=at_most(buckets(num_slots, 4, score_bytes(policy.score_rows(False))), limit),
        window_buckets=at_most(
            buckets(window_lanes, 4, score_bytes(policy.score_rows(True))), limit
        ),
        window_rows=at_most(window_rows(policy, nbytes(row_shape) + nbytes(x_shape)), limit),
        block_rows=at_most(block_rows(policy, nbytes(row_shape) + nbytes(x_shape)), limit),
        answer_rows=answer_rows,
        block_answer_rows=block_answer_rows,
        block_speculation=block_speculation(policy, nbytes(answer_shape), max_transitions),
        block_scoring=block_scoring,
        speculation_lengths=speculation_lengths(process, recursion_block),
        max_transitions=max_transitions,
        enumeration_buckets=at_most(
            buckets(min(num_slots, max_transitions), 1, 2 * nbytes(x_shape) + nbytes(answer_shape)),
            limit,
        ),
        depth=depth,
        batch_sizes=batch_sizes,
        max_rounds=max_rounds,
        mesh=mesh,
    )
