"""The round scheduler: recursive speculative rejection sampling as one compiled program.

docs/algorithm.md, section 4: the trials of the residual loop run *independently*, each at its own
pace, so nested ``vmap`` (lockstep lanes) cannot keep the paper's parallel time.  This module
keeps a fixed-capacity pool of tasks (:mod:`numpyro_autospec.engine.pool`) and repeats

1. **transitions** -- advance every task that needs no oracle answer (speculate, accept or
   reject, spawn residual trials, report trials to their parents, cancel the losers, start new
   draws), in bounded *micro-steps* until nothing moves;
2. **one round** -- gather every ready query of every task of every draw into one batch, call
   the oracle once on it (vmapped) and scatter the answers back.

Rounds and queries are counted here, per draw, as they are executed.  All randomness is drawn
from keys derived exactly as in :mod:`numpyro_autospec.reference` (via
:mod:`numpyro_autospec.rejection`), so the draws do not depend on the capacities at all, and
with enough capacity the rounds equal the reference's.

Deadlock freedom with a finite pool: a task that may still recurse ``d`` levels needs ``d``
more slots in the worst case.  The scheduler keeps ``free slots >= sum of the needs of the
tasks without children`` (the needs of the leaves of the task forest): the first trial of a
waiting task is always admitted (it moves one unit of need into one slot), while extra
parallel trials and new draws are admitted only if the inequality still holds afterwards.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.config import RootPolicy, SamplerConfig
from numpyro_autospec.engine.pool import NO_TRIAL, Pool, Status, empty_pool, gather, scatter
from numpyro_autospec.oracles.validation import OracleError
from numpyro_autospec.processes.base import has_discrete_steps
from numpyro_autospec.rejection import (
    batch_size,
    block_keys,
    residual_accepts,
    speculation_accepts,
    trial_keys,
)
from numpyro_autospec.verification import VERIFIERS

__all__ = ["Capacity", "Samples", "run", "plan"]


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
        levels of the largest recursion block), at least :data:`RECURSION_ROOT_SLOTS` in all
        when the root is made of recursion blocks, capped by the memory budget and 8192.
    max_queries:
        oracle evaluations per round (the batch of one oracle call).  The batch is executed in
        the smallest of a few power-of-4 bucket sizes that holds the round's demand.
    max_transitions:
        tasks advanced per micro-step (bounds the per-micro-step gather/scatter work).
    memory_budget:
        bytes the pool and the query batch may use when sizes are chosen by default.
    """

    num_slots: int | None = None
    max_queries: int | None = None
    max_transitions: int | None = None
    memory_budget: int = 1 << 30


class Samples(NamedTuple):
    """Draws with the cost the scheduler executed for each (leading axis: draw): ``rounds``
    (batched oracle calls), ``queries`` (oracle evaluations: a speculation query, a
    single-step query and a block-scoring call each count one) and ``conditionals`` (rows of
    conditionals the oracle returned)."""

    value: Any
    rounds: Array
    queries: Array
    conditionals: Array | None = None


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
    query_buckets: tuple[int, ...]
    lane_buckets: tuple[int, ...]  # batch sizes of speculation queries and block-scoring calls
    answer_rows: int  # rows of a speculation answer
    block_scoring: bool  # scoring steps of a block are one score_block call
    max_transitions: int
    depth: np.ndarray  # depth[m]: nesting levels below a block of m steps
    batch_sizes: np.ndarray  # cumulative-free batch size table b_r
    max_rounds: int


def _buckets(largest: int, smallest: int = 16) -> tuple[int, ...]:
    """Batch sizes ``largest, largest / 4, ...`` down to ``smallest`` (a round runs in the
    smallest that holds its demand)."""
    sizes, size = [], max(1, int(largest))
    while True:
        sizes.append(size)
        if size <= smallest:
            break
        size = max(smallest, size // 4)
    return tuple(sorted(set(sizes)))


def _has_batched_forms(process) -> bool:
    """Whether ``process`` declares the batched single-step forms ``query_batch`` and
    ``score_batch`` (declared by ``batched_queries = True``)."""
    return bool(getattr(process, "batched_queries", False))


def _pad_rows(tree, like):
    """Pad the row axis (axis 1, after the batch axis) of every leaf of ``tree`` with zeros to
    the shape of ``like`` (single-step answers stored in speculation-answer fields)."""

    def pad(leaf, shape):
        if leaf.shape[1:] == shape.shape:
            return leaf
        widths = [(0, 0)] + [(0, t - c) for c, t in zip(leaf.shape[1:], shape.shape, strict=True)]
        return jnp.pad(leaf, widths)

    return jax.tree.map(pad, tree, like)


def _nbytes(tree) -> int:
    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def plan(process, config: SamplerConfig, capacity: Capacity, num_draws: int, key_like) -> Plan:
    """Resolve the static sizes of a run."""
    config = config.validate()
    n = int(process.num_steps)
    policy = config.root_policy(n, has_discrete_steps(process))
    seq = policy.recursion_block
    window = policy.max_window if policy.rule is not None else 1
    depth = np.zeros(seq + 2, np.int32)
    for m in range(seq + 2):
        depth[m] = 0 if m <= policy.leaf_size else 1 + depth[(m + 1) // 2]
    root_need = int(depth[seq])

    x_shape = jax.eval_shape(process.init, key_like)
    answer_rows = policy.answer_rows
    answer_shape = jax.eval_shape(lambda x: process.query(x, 0, answer_rows), x_shape)
    row_shape = jax.eval_shape(lambda x: process.query(x, 0, 1), x_shape)
    block_scoring = bool(process.scores_blocks)
    slot_bytes = 3 * _nbytes(answer_shape) + _nbytes(x_shape) + 512
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
            raise ValueError(
                f"capacity.num_slots={num_slots} is too small: recursion blocks of {seq} steps "
                f"nest {root_need} levels of residual trials: at least {minimum} slots are needed"
            )
    if capacity.max_queries is None:
        demand = num_slots * (seq + 1) + min(num_draws, num_slots) * (window + 1)
        # a query holds its answer and, unless the process has batched forms, a copy of its
        # slot's state
        batched = _has_batched_forms(process)
        query_bytes = _nbytes(row_shape) + (0 if batched else _nbytes(x_shape))
        affordable = max(1, capacity.memory_budget // (2 * max(1, query_bytes)))
        max_queries = max(1, min(demand, affordable, 1 << 16))
    else:
        max_queries = int(capacity.max_queries)
        if max_queries < 1:
            raise ValueError(f"capacity.max_queries must be >= 1, got {max_queries}")
    buckets = _buckets(max_queries)
    if capacity.max_transitions is None:
        # every micro-step gathers K slots in each of its phases, whether they move or not,
        # so K * slot_bytes is per-micro-step memory traffic: keep it near 1 MiB (measured
        # at n = 1024: K = 16 runs 7x faster than K = 288, see docs/engine.md)
        max_transitions = max(1, min(num_slots, max(16, (1 << 20) // slot_bytes)))
    else:
        max_transitions = int(capacity.max_transitions)
        if max_transitions < 1:
            raise ValueError(f"capacity.max_transitions must be >= 1, got {max_transitions}")
    batch_sizes = np.array(
        [min(batch_size(r, config.growth), 1 << 24) for r in range(64)], dtype=np.int32
    )
    max_rounds = 64 * (n + 2) * max(1, num_draws) + 1024
    return Plan(
        num_steps=n,
        policy=policy,
        seq_block=seq,
        window_size=window,
        verify_lanes=max(1, min(num_draws, max_transitions)),
        lookahead=bool(config.lookahead),
        final_query=bool(process.final_query),
        num_draws=num_draws,
        num_slots=num_slots,
        query_buckets=buckets,
        lane_buckets=_buckets(num_slots, smallest=4),
        answer_rows=answer_rows,
        block_scoring=block_scoring,
        max_transitions=max_transitions,
        depth=depth,
        batch_sizes=batch_sizes,
        max_rounds=max_rounds,
    )


class EngineState(NamedTuple):
    pool: Pool
    output: Any  # [D, ...]
    done: Array  # bool[D]
    started: Array  # bool[D]
    rounds: Array  # int32[D]
    queries: Array  # int32[D]
    conditionals: Array  # int32[D]
    rows: Any  # [D, W, ...]: reduced target answers of each draw's current root window
    defect: Array  # int32[4]: (code, row, step, draw) of the first defective answer; code 0: none
    next_draw: Array  # int32
    total_rounds: Array  # int32
    stalled: Array  # bool


def _where(condition, new, old):
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), new, old)


def _nonfinite_defect(answer) -> tuple[Array, Array]:
    """Generic answer check: code 1 (NaN) or 2 (+-inf) and the first offending flat index."""
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(answer)])
    nan, inf = jnp.isnan(flat), jnp.isinf(flat)
    code = jnp.where(jnp.any(nan), 1, jnp.where(jnp.any(inf), 2, 0)).astype(jnp.int32)
    return code, jnp.argmax(jnp.where(code == 1, nan, inf)).astype(jnp.int32)


def _describe(process, code: int, row: int, step: int) -> str:
    describe = getattr(process, "describe_defect", None)
    if describe is not None:
        return describe(code, row, step)
    kind = {1: "NaN", 2: "an infinite value"}.get(code, f"defect code {code}")
    return f"the oracle of {process!r} returned {kind} (entry {row}) for the query at step {step}"


class _Scheduler:
    def __init__(
        self, process, config: SamplerConfig, plan_: Plan, keys: Array, validate: bool = True
    ):
        self.process = process
        self.validate = validate
        self.answer_defect = getattr(process, "answer_defect", None) or (
            lambda x, k, answer: _nonfinite_defect(answer)
        )
        self.config = config
        self.plan = plan_
        self.keys = keys
        self.depth = jnp.asarray(plan_.depth)
        self.batch_sizes = jnp.asarray(plan_.batch_sizes)

    # ------------------------------------------------------------------ helpers
    def block_key(self, slot: Pool) -> Array:
        root_key = jax.random.fold_in(slot.key_first, slot.block_index)
        trial_key = jnp.where(slot.block_index == 0, slot.key_first, slot.key_second)
        return jnp.where(slot.parent < 0, root_key, trial_key)

    def wants_lookahead(self, end: Array) -> Array:
        n = self.plan.num_steps
        if not self.plan.lookahead:
            return jnp.zeros_like(end, bool)
        return (end < n) | ((end == n) & self.plan.final_query)

    # ----------------------------------------------------- local transitions (one slot)
    def local_step(self, s: Pool) -> Pool:
        """Advance one task through the cheap transitions that need no oracle answer.  The
        transitions that cost a pass over the whole state (speculation, the acceptance test,
        a trial's residual test) run in their own phases, on the slots that need them only
        (:meth:`speculate`, :meth:`decide`, :meth:`finish`); root windows are verified per
        draw (:meth:`verify_windows`)."""
        p, plan = self.process, self.plan
        block_key = self.block_key(s)

        # (a) a leaf step whose answer is known: sample it
        leaf_step = (s.status == Status.LEAF) & s.has_answer
        reduced = p.reduce(s.x, s.cursor, s.answer)
        leaf_key = jax.random.fold_in(block_key, s.cursor - s.block_start)
        x_leaf = p.target_sample(leaf_key, s.x, s.cursor, reduced)
        log_mu_leaf = s.log_mu_block + p.target_logp(x_leaf, s.cursor, reduced)
        cursor_leaf = s.cursor + 1
        s = _where(
            leaf_step,
            s._replace(
                x=x_leaf,
                log_mu_block=log_mu_leaf,
                cursor=cursor_leaf,
                has_answer=jnp.zeros_like(s.has_answer),
                has_next=jnp.zeros_like(s.has_next),
                status=jnp.where(cursor_leaf == s.block_end, Status.BLOCK_DONE, Status.LEAF),
            ),
            s,
        )

        # (b) a finished block: move the driver to the next block or finish the range
        s = _where(s.status == Status.BLOCK_DONE, self.next_block(s), s)

        # (c) a new block: leaf, speculate (answer known) or ask for O_a
        length = s.block_end - s.block_start
        is_leaf = (length <= plan.policy.leaf_size) & ~s.verifying
        new_status = jnp.where(
            is_leaf,
            Status.LEAF,
            jnp.where(s.has_answer, Status.SPECULATE, Status.NEED_ANSWER),
        )
        starting = s.status == Status.START
        return s._replace(
            status=jnp.where(starting, new_status, s.status),
            cursor=jnp.where(starting & is_leaf, s.block_start, s.cursor),
            log_mu_block=jnp.where(starting & is_leaf, 0.0, s.log_mu_block),
        )

    def speculate(self, s: Pool) -> Pool:
        """``x' ~ nu`` frozen at ``O_a`` (window: ``split(key)[0]``; recursion block:
        ``block_keys(key)[0]``), and the scoring round is set up (``m - 1`` queries, plus the
        lookahead)."""
        p = self.process
        block_key = self.block_key(s)
        length = s.block_end - s.block_start
        k_spec = jnp.where(s.verifying, jax.random.split(block_key)[0], block_keys(block_key)[0])
        x_spec = p.spec_sample(k_spec, s.x, s.block_start, length, s.answer)
        first = p.reduce(x_spec, s.block_start, s.answer)
        return s._replace(
            status=jnp.full_like(s.status, Status.SCORING),
            x=x_spec,
            log_mu_block=p.target_logp(x_spec, s.block_start, first),
            score_next=s.block_start + 1,
            score_end=s.block_end,
        )

    def decide(self, s: Pool) -> Pool:
        """A scored recursion block: accept ``x'`` with probability ``min(1, mu/nu)``, else
        start the residual loop."""
        p = self.process
        _, k_accept, k_residual = block_keys(self.block_key(s))
        length = s.block_end - s.block_start
        log_nu = p.spec_logp(s.x, s.block_start, length, s.answer)
        accepted = speculation_accepts(k_accept, s.log_mu_block, log_nu)
        accept_state = s._replace(status=Status.BLOCK_DONE, cursor=s.block_end)
        reject_state = s._replace(
            status=Status.WAITING,
            epoch=s.epoch + 1,
            key_residual=k_residual,
            trial_next=jnp.zeros_like(s.trial_next),
            batch=jnp.zeros_like(s.batch),
            batch_end=self.batch_sizes[0] + jnp.zeros_like(s.batch_end),
            best_trial=jnp.full_like(s.best_trial, NO_TRIAL),
        )
        return _where(accepted, accept_state, reject_state)

    def finish(self, s: Pool) -> Pool:
        """A finished range: a trial takes its residual test ``max(0, 1 - nu/mu)`` and
        reports; a root asks for its final query or completes."""
        p, plan = self.process, self.plan
        log_nu = p.spec_logp(s.x, s.start, s.stop - s.start, s.answer_parent)
        trial_accepts = residual_accepts(s.key_accept, s.log_mu_total, log_nu)
        if plan.final_query:
            root_status = jnp.where(s.has_answer, Status.COMPLETE, Status.NEED_FINAL)
        else:
            root_status = jnp.full_like(s.status, Status.COMPLETE)
        return s._replace(
            status=jnp.where(s.parent < 0, root_status, Status.REPORT),
            report_accept=trial_accepts,
            cursor=jnp.where(s.parent < 0, s.stop, s.cursor),
        )

    def next_block(self, s: Pool) -> Pool:
        """After a block: a trial runs its right half; a root follows its
        :class:`~numpyro_autospec.config.RootPolicy` (a recursion block after a window that
        advanced fewer than ``floor`` steps, else the next window, of adapted size)."""
        policy = self.plan.policy
        is_root = s.parent < 0
        finished = s.cursor >= s.stop
        if policy.rule is None:
            verifying = jnp.zeros_like(s.verifying)
            root_end = jnp.minimum(s.cursor + policy.recursion_block, s.stop)
            window, advanced, windows, window_start = (
                s.window,
                s.advanced,
                s.windows,
                s.window_start,
            )
        else:
            partial = s.verifying & (s.cursor < s.block_end)
            fallback = (
                partial & (s.cursor - s.block_start < policy.floor) & (policy.recursion_block > 0)
            )
            done = ~fallback  # the window (and its fallback block, if any) is over
            advanced = s.advanced + jnp.where(done, s.cursor - s.window_start, 0)
            windows = s.windows + done.astype(jnp.int32)
            window = s.window
            if policy.window_growth > 0:
                adapted = jnp.clip(
                    policy.window_growth * advanced // jnp.maximum(windows, 1),
                    policy.min_window,
                    policy.max_window,
                )
                window = jnp.where(done, adapted, s.window)
            verifying = ~fallback
            root_end = jnp.where(
                fallback,
                jnp.minimum(s.cursor + policy.recursion_block, s.stop),
                jnp.minimum(s.cursor + window, s.stop),
            )
            window_start = jnp.where(done, s.cursor, s.window_start)
        return s._replace(
            status=jnp.where(finished, Status.FINISHED, Status.START),
            answer=s.answer_next,
            has_answer=s.has_next,
            has_next=jnp.zeros_like(s.has_next),
            log_mu_total=s.log_mu_total + s.log_mu_block,
            log_mu_block=jnp.zeros_like(s.log_mu_block),
            block_index=s.block_index + 1,
            block_start=s.cursor,
            block_end=jnp.where(finished, s.block_end, jnp.where(is_root, root_end, s.stop)),
            verifying=is_root & verifying & ~finished,
            window=jnp.where(is_root, window, s.window),
            advanced=jnp.where(is_root, advanced, s.advanced),
            windows=jnp.where(is_root, windows, s.windows),
            window_start=jnp.where(is_root, window_start, s.window_start),
        )

    def verify_windows(self, pool: Pool, rows) -> tuple[Pool, Array]:
        """Verify the scored root windows (up to ``verify_lanes`` of them): keep the longest
        valid prefix plus a corrected step (:mod:`numpyro_autospec.verification`).  The target
        rows of steps ``a+1..`` were stored per draw by the rounds; row ``a`` is recomputed
        from ``O_a`` (the same value the speculation used)."""
        plan, p = self.plan, self.process
        P, W = plan.num_slots, plan.window_size
        ready = self.scored(pool) & pool.verifying
        (slots,) = jnp.nonzero(ready, size=plan.verify_lanes, fill_value=P)

        def verify(pool):
            s = gather(pool, jnp.minimum(slots, P - 1))
            draw_rows = gather(rows, s.draw)

            def one(s, target_rows):
                _, k_verify = jax.random.split(self.block_key(s))
                length = s.block_end - s.block_start
                steps = jnp.minimum(s.block_start + jnp.arange(W), s.block_end - 1)
                first = p.reduce(s.x, s.block_start, s.answer)
                target_rows = jax.tree.map(lambda buf, r: buf.at[0].set(r), target_rows, first)
                draft_rows = jax.vmap(p.spec_reduce, (None, None, 0, None))(
                    s.x, s.block_start, steps, s.answer
                )
                values = jax.vmap(p.step_value, (None, 0))(s.x, steps)
                verdict = VERIFIERS[plan.policy.rule](
                    k_verify, target_rows, draft_rows, values, length
                )
                full = verdict.kept == length
                corrected = p.set_step_value(
                    s.x,
                    jnp.minimum(s.block_start + verdict.kept, s.block_end - 1),
                    verdict.correction,
                )
                return s._replace(
                    status=jnp.full_like(s.status, Status.BLOCK_DONE),
                    x=_where(full, s.x, corrected),
                    cursor=jnp.where(full, s.block_end, s.block_start + verdict.kept + 1),
                    has_next=s.has_next & full,
                )

            return scatter(pool, slots, jax.vmap(one)(s, draw_rows))

        return jax.lax.cond(jnp.any(ready), verify, lambda pool: pool, pool), jnp.any(ready)

    def scored(self, pool: Pool) -> Array:
        """Slots whose scoring round is done: every step scored and the lookahead (if any)
        answered."""
        lookahead_done = pool.has_next | ~self.wants_lookahead(pool.block_end)
        scoring = pool.status == Status.SCORING
        return scoring & (pool.score_next >= pool.block_end) & lookahead_done

    def is_local(self, pool: Pool) -> Array:
        st = pool.status
        return (
            (st == Status.START)
            | (st == Status.BLOCK_DONE)
            | ((st == Status.LEAF) & pool.has_answer)
        )

    def phase(self, pool: Pool, mask: Array, transition) -> tuple[Pool, Array]:
        """Apply ``transition`` to up to ``max_transitions`` slots of ``mask`` (compacted);
        skipped entirely when no slot needs it."""
        P, K = self.plan.num_slots, self.plan.max_transitions
        (index,) = jnp.nonzero(mask, size=K, fill_value=P)

        def apply(pool):
            gathered = gather(pool, jnp.minimum(index, P - 1))
            moved = jax.vmap(transition)(gathered)
            # write back only the fields the transition changed (an unchanged field is the
            # gathered array itself): large answers are not copied back and forth
            return jax.tree.map(
                lambda leaf, new, old: leaf
                if new is old
                else leaf.at[index].set(new, mode="drop"),
                pool,
                moved,
                gathered,
            )

        return jax.lax.cond(jnp.any(mask), apply, lambda pool: pool, pool), jnp.any(mask)

    # ----------------------------------------------------------------- micro-step
    def micro_step(self, state: EngineState) -> tuple[EngineState, Array]:
        plan = self.plan
        P, K = plan.num_slots, plan.max_transitions
        pool = state.pool
        # 1. cancel orphans: tasks whose parent resolved, moved on or was freed
        parent = jnp.clip(pool.parent, 0, P - 1)
        has_parent = (pool.status != Status.FREE) & (pool.parent >= 0)
        orphan = has_parent & (
            (pool.epoch[parent] != pool.parent_epoch) | (pool.status[parent] != Status.WAITING)
        )
        pool = pool._replace(
            status=jnp.where(orphan, Status.FREE, pool.status),
            epoch=pool.epoch + orphan.astype(jnp.int32),
        )

        # 2. reports: finished trials tell their parent; the smallest accepted index wins
        (reporter,) = jnp.nonzero(pool.status == Status.REPORT, size=K, fill_value=P)
        valid = reporter < P

        def report(pool):
            rep = gather(pool, jnp.minimum(reporter, P - 1))
            accepted = valid & rep.report_accept
            target = jnp.where(accepted, rep.parent, P)
            best = pool.best_trial.at[target].min(rep.trial, mode="drop")
            winner = accepted & (best[jnp.clip(rep.parent, 0, P - 1)] == rep.trial)
            win_target = jnp.where(winner, rep.parent, P)
            pool = pool._replace(best_trial=best)
            pool = pool._replace(
                x=scatter(pool.x, win_target, rep.x),
                log_mu_block=pool.log_mu_block.at[win_target].set(rep.log_mu_total, mode="drop"),
                answer_next=scatter(pool.answer_next, win_target, rep.answer),
                has_next=pool.has_next.at[win_target].set(rep.has_answer, mode="drop"),
            )
            freed = jnp.where(valid, reporter, P)
            pool = pool._replace(
                status=pool.status.at[freed].set(Status.FREE, mode="drop"),
                epoch=pool.epoch.at[freed].add(1, mode="drop"),
            )
            return pool

        pool = jax.lax.cond(jnp.any(valid), report, lambda pool: pool, pool)

        # 3. waiting tasks: resolve (winner known, all earlier trials rejected) or next batch
        live = pool.status != Status.FREE
        child = live & (pool.parent >= 0)
        segment = jnp.where(child, pool.parent, P)
        live_children = jax.ops.segment_sum(child.astype(jnp.int32), segment, P + 1)[:P]
        parent = jnp.clip(pool.parent, 0, P - 1)
        below = child & (pool.trial < pool.best_trial[parent])
        live_below = jax.ops.segment_sum(below.astype(jnp.int32), segment, P + 1)[:P]
        waiting = pool.status == Status.WAITING
        resolved = waiting & (pool.best_trial < NO_TRIAL) & (live_below == 0)
        exhausted = (
            waiting
            & (pool.best_trial >= NO_TRIAL)
            & (pool.trial_next >= pool.batch_end)
            & (live_children == 0)
        )
        next_batch = jnp.minimum(pool.batch + 1, self.batch_sizes.shape[0] - 1)
        pool = pool._replace(
            status=jnp.where(resolved, Status.BLOCK_DONE, pool.status),
            cursor=jnp.where(resolved, pool.block_end, pool.cursor),
            epoch=pool.epoch + resolved.astype(jnp.int32),
            batch=jnp.where(exhausted, next_batch, pool.batch),
            batch_end=jnp.where(
                exhausted, pool.batch_end + self.batch_sizes[next_batch], pool.batch_end
            ),
        )

        # 4. root windows whose scoring round is done: verification (per draw)
        verified = jnp.array(False)
        if plan.policy.rule is not None:
            pool, verified = self.verify_windows(pool, state.rows)

        # 5. transitions of up to K tasks each: the cheap local ones, then the speculations,
        # acceptance tests and residual tests (each a pass over the state)
        pool, moved_local = self.phase(pool, self.is_local(pool), self.local_step)
        pool, moved_spec = self.phase(pool, pool.status == Status.SPECULATE, self.speculate)
        scored = self.scored(pool) & ~pool.verifying
        pool, moved_decide = self.phase(pool, scored, self.decide)
        pool, moved_finish = self.phase(pool, pool.status == Status.FINISHED, self.finish)
        moved = moved_local | moved_spec | moved_decide | moved_finish

        # 6. completed draws: write their outputs and free their slots
        (completing,) = jnp.nonzero(pool.status == Status.COMPLETE, size=K, fill_value=P)
        valid = completing < P

        def complete(carry):
            pool, output, done = carry
            comp = gather(pool, jnp.minimum(completing, P - 1))
            final = comp.answer if plan.final_query else None
            outputs = jax.vmap(self.process.output)(comp.x, final)
            draw_target = jnp.where(valid, comp.draw, plan.num_draws)
            output = scatter(output, draw_target, outputs)
            done = done.at[draw_target].set(True, mode="drop")
            freed = jnp.where(valid, completing, P)
            pool = pool._replace(
                status=pool.status.at[freed].set(Status.FREE, mode="drop"),
                epoch=pool.epoch.at[freed].add(1, mode="drop"),
            )
            return pool, output, done

        pool, output, done = jax.lax.cond(
            jnp.any(valid), complete, lambda carry: carry, (pool, state.output, state.done)
        )

        # 7. spawn residual trials and start new draws, keeping the pool deadlock-free
        pool, next_draw, started, spawned = self.admit(pool, state)

        progressed = (
            jnp.any(orphan)
            | jnp.any(reporter < P)
            | jnp.any(resolved | exhausted)
            | moved
            | verified
            | jnp.any(completing < P)
            | spawned
        )
        state = state._replace(
            pool=pool, output=output, done=done, started=started, next_draw=next_draw
        )
        return state, progressed

    def admit(self, pool: Pool, state: EngineState):
        plan = self.plan
        P, K = plan.num_slots, plan.max_transitions
        live = pool.status != Status.FREE
        child = live & (pool.parent >= 0)
        segment = jnp.where(child, pool.parent, P)
        live_children = jax.ops.segment_sum(child.astype(jnp.int32), segment, P + 1)[:P]
        waiting = pool.status == Status.WAITING
        length = pool.block_end - pool.block_start
        need = jnp.where(
            waiting,
            self.depth[jnp.clip(length, 0, plan.seq_block + 1)],
            self.depth[jnp.clip(pool.max_block, 0, plan.seq_block + 1)],
        )
        leaves = live & (live_children == 0)
        free = jnp.sum(~live)
        budget = free - jnp.sum(jnp.where(leaves, need, 0))

        # spawn candidates: first the first trial of every waiting task without children
        # (always admissible), then further trials as (parent, offset) pairs in slot order
        demand = jnp.where(waiting, jnp.maximum(pool.batch_end - pool.trial_next, 0), 0)
        wants_first = (demand > 0) & (live_children == 0)
        (first_parent,) = jnp.nonzero(wants_first, size=K, fill_value=P)
        first_valid = first_parent < P
        extra_demand = demand - wants_first.astype(jnp.int32)
        cumulative = jnp.cumsum(extra_demand)
        index = jnp.arange(K)
        extra_parent = jnp.minimum(jnp.searchsorted(cumulative, index, side="right"), P - 1)
        extra_valid = index < cumulative[-1]
        extra_offset = (
            index
            - (cumulative[extra_parent] - extra_demand[extra_parent])
            + wants_first[extra_parent].astype(jnp.int32)
        )
        spawn_parent = jnp.concatenate([jnp.minimum(first_parent, P - 1), extra_parent])
        offset = jnp.concatenate([jnp.zeros(K, jnp.int32), extra_offset])
        child_need = self.depth[jnp.clip((length[spawn_parent] + 1) // 2, 0, plan.seq_block + 1)]
        spawn_cost = jnp.concatenate([jnp.zeros(K, jnp.int32), 1 + child_need[K:]])

        # new draws
        root_draw = state.next_draw + index
        root_valid = root_draw < plan.num_draws
        root_cost = jnp.full((K,), 1 + int(plan.depth[plan.seq_block]), jnp.int32)

        is_first = jnp.concatenate([first_valid, jnp.zeros(2 * K, bool)])
        valid = jnp.concatenate([first_valid, extra_valid, root_valid])
        cost = jnp.concatenate([spawn_cost, root_cost])
        # firsts are always admitted (they keep the invariant); others while the budget
        # lasts (spend is monotone, so extras are admitted in order: smallest trial first)
        spend = jnp.cumsum(jnp.where(valid & ~is_first, cost, 0))
        admitted = valid & (is_first | (spend <= budget))
        rank = jnp.cumsum(admitted) - 1
        admitted = admitted & (rank < free)
        (free_slots,) = jnp.nonzero(~live, size=3 * K, fill_value=P)
        destination = jnp.where(admitted, free_slots[jnp.clip(rank, 0, 3 * K - 1)], P)
        spawn_destination, root_destination = destination[: 2 * K], destination[2 * K :]
        spawn_ok, root_ok = admitted[: 2 * K], admitted[2 * K :]
        K2 = 2 * K

        # children (skipped when none is admitted: a scatter of whole slots is not free)
        def spawn(pool):
            parents = gather(pool, spawn_parent)
            trial = parents.trial_next + offset
            k_left, k_right, k_accept = jax.vmap(trial_keys)(parents.key_residual, trial)
            half = (length[spawn_parent] + 1) // 2
            old_epoch = pool.epoch[jnp.minimum(spawn_destination, P - 1)]
            children = parents._replace(
                status=jnp.full((K2,), Status.START, jnp.int32),
                parent=spawn_parent.astype(jnp.int32),
                parent_epoch=parents.epoch,
                epoch=old_epoch + 1,
                trial=trial,
                key_first=k_left,
                key_second=k_right,
                key_accept=k_accept,
                start=parents.block_start,
                stop=parents.block_end,
                max_block=half,
                block_index=jnp.zeros((K2,), jnp.int32),
                block_end=parents.block_start + half,
                cursor=parents.block_start,
                has_answer=jnp.ones((K2,), bool),
                has_next=jnp.zeros((K2,), bool),
                answer_parent=parents.answer,
                log_mu_block=jnp.zeros((K2,), jnp.float32),
                log_mu_total=jnp.zeros((K2,), jnp.float32),
                best_trial=jnp.full((K2,), NO_TRIAL, jnp.int32),
                verifying=jnp.zeros((K2,), bool),
            )
            return scatter(pool, spawn_destination, children)

        pool = jax.lax.cond(jnp.any(spawn_ok), spawn, lambda pool: pool, pool)
        spawned_per_parent = jax.ops.segment_sum(
            spawn_ok.astype(jnp.int32), jnp.where(spawn_ok, spawn_parent, P), P + 1
        )[:P]
        pool = pool._replace(trial_next=pool.trial_next + spawned_per_parent)

        # roots (skipped when none starts)
        def start(pool):
            policy = plan.policy
            first_block = policy.first_window if policy.rule is not None else policy.recursion_block
            draw = jnp.minimum(root_draw, plan.num_draws - 1)
            k_init, k_run = jax.vmap(jax.random.split, out_axes=1)(self.keys[draw])
            x0 = jax.vmap(self.process.init)(k_init)
            template = gather(pool, jnp.zeros((K,), jnp.int32))
            zeros = jnp.zeros((K,), jnp.int32)
            roots = template._replace(
                status=jnp.full((K,), Status.START, jnp.int32),
                draw=draw.astype(jnp.int32),
                parent=zeros - 1,
                parent_epoch=zeros,
                epoch=pool.epoch[jnp.minimum(root_destination, P - 1)] + 1,
                trial=zeros,
                key_first=k_run,
                start=zeros,
                stop=zeros + plan.num_steps,
                max_block=zeros + plan.seq_block,
                block_index=zeros,
                block_start=zeros,
                block_end=zeros + min(first_block, plan.num_steps),
                verifying=jnp.full((K,), policy.rule is not None),
                window=zeros + policy.first_window,
                advanced=zeros,
                windows=zeros,
                window_start=zeros,
                cursor=zeros,
                x=x0,
                has_answer=jnp.zeros((K,), bool),
                has_next=jnp.zeros((K,), bool),
                log_mu_block=jnp.zeros((K,), jnp.float32),
                log_mu_total=jnp.zeros((K,), jnp.float32),
                best_trial=jnp.full((K,), NO_TRIAL, jnp.int32),
            )
            return scatter(pool, root_destination, roots)

        pool = jax.lax.cond(jnp.any(root_ok), start, lambda pool: pool, pool)
        draw = jnp.minimum(root_draw, plan.num_draws - 1)
        num_started = jnp.sum(root_ok)
        started = state.started.at[jnp.where(root_ok, draw, plan.num_draws)].set(True, mode="drop")
        return pool, state.next_draw + num_started, started, jnp.any(admitted)

    def transitions(self, state: EngineState) -> EngineState:
        def cond(carry):
            _, progressed, count = carry
            return progressed & (count < 100_000)

        def body(carry):
            state, _, count = carry
            state, progressed = self.micro_step(state)
            return state, progressed, count + 1

        state, _, _ = jax.lax.while_loop(cond, body, (state, jnp.array(True), jnp.array(0)))
        return state

    # ------------------------------------------------------------------ a round
    # A round is one batched oracle call over every ready query of every task.  Its queries
    # are of three shapes, each batched on its own (they run in parallel: one round):
    #   speculation queries  query(x, k, R): O_a of a block, or the lookahead after a block;
    #   single-step queries  query(x, k, 1): leaf steps, the final query, and the scoring
    #                        steps of a block when the process does not score blocks;
    #   block-scoring calls  score_block(x, a + 1, L): every scoring step of a block at once.
    def speculation_demand(self, pool: Pool) -> Array:
        lookahead = (
            (pool.status == Status.SCORING)
            & self.wants_lookahead(pool.block_end)
            & ~pool.has_next
        )
        return (pool.status == Status.NEED_ANSWER) | lookahead

    def step_demand(self, pool: Pool) -> Array:
        st = pool.status
        single = ((st == Status.LEAF) & ~pool.has_answer) | (st == Status.NEED_FINAL)
        if self.plan.block_scoring:
            return single.astype(jnp.int32)
        scoring = jnp.where(
            st == Status.SCORING, jnp.maximum(pool.block_end - pool.score_next, 0), 0
        )
        return jnp.where(single, 1, scoring)

    def block_demand(self, pool: Pool) -> Array:
        if not self.plan.block_scoring:
            return jnp.zeros(pool.status.shape, bool)
        return (pool.status == Status.SCORING) & (pool.score_next < pool.block_end)

    def _record_defect(self, state, valid, x, step, answers, slot, pool) -> Array:
        """The first defective answer of a batch, if none was recorded before."""
        if not self.validate:
            return state.defect
        codes, rows_hit = jax.vmap(self.answer_defect)(x, step, answers)
        bad = valid & (codes > 0)
        first = jnp.argmax(bad)
        record = jnp.stack([codes[first], rows_hit[first], step[first], pool.draw[slot[first]]])
        return jnp.where(jnp.any(bad) & (state.defect[0] == 0), record, state.defect)

    def _count(self, state, valid, slot, rows) -> EngineState:
        """Add the batch's queries (one per valid lane) and conditionals (``rows`` per lane)
        to the per-draw counters."""
        plan = self.plan
        draw = jnp.where(valid, state.pool.draw[slot], plan.num_draws)
        queries = jax.ops.segment_sum(valid.astype(jnp.int32), draw, plan.num_draws + 1)
        conditionals = jax.ops.segment_sum(
            jnp.where(valid, rows, 0).astype(jnp.int32), draw, plan.num_draws + 1
        )
        return state._replace(
            queries=state.queries + queries[: plan.num_draws],
            conditionals=state.conditionals + conditionals[: plan.num_draws],
        )

    def speculation_round(self, state: EngineState, lanes: int) -> EngineState:
        """``query(x, k, R)`` for every slot that needs ``O_a`` or a lookahead."""
        plan, p = self.plan, self.process
        P, R, N = plan.num_slots, plan.answer_rows, plan.num_steps
        pool = state.pool
        (slot,) = jnp.nonzero(self.speculation_demand(pool), size=lanes, fill_value=P)
        valid = slot < P
        slot = jnp.minimum(slot, P - 1)
        need_answer = valid & (pool.status[slot] == Status.NEED_ANSWER)
        lookahead = valid & ~need_answer
        step = jnp.where(need_answer, pool.cursor[slot], pool.block_end[slot])
        x = gather(pool.x, slot)
        answers = jax.vmap(lambda x, k: p.query(x, k, R))(x, step)
        defect = self._record_defect(state, valid, x, step, answers, slot, pool)
        answer_target = jnp.where(need_answer, slot, P)
        next_target = jnp.where(lookahead, slot, P)
        pool = pool._replace(
            answer=scatter(pool.answer, answer_target, answers),
            has_answer=pool.has_answer.at[answer_target].set(True, mode="drop"),
            status=pool.status.at[answer_target].set(Status.START, mode="drop"),
            answer_next=scatter(pool.answer_next, next_target, answers),
            has_next=pool.has_next.at[next_target].set(True, mode="drop"),
        )
        state = state._replace(pool=pool, defect=defect)
        return self._count(state, valid, slot, jnp.clip(N - step, 1, R))

    def step_round(self, state: EngineState, batch: int) -> EngineState:
        """Up to ``batch`` single-step queries ``query(x, k, 1)`` (leaf steps, final queries,
        and scoring steps when the process does not score blocks)."""
        plan, p = self.plan, self.process
        P = plan.num_slots
        pool = state.pool
        # older draws first (then slot order), so that a tight query capacity delays new
        # draws rather than starving old ones
        priority = jnp.argsort(pool.draw * P + jnp.arange(P))
        demand = self.step_demand(pool)[priority]
        cumulative = jnp.cumsum(demand)
        index = jnp.arange(batch)
        rank = jnp.minimum(jnp.searchsorted(cumulative, index, side="right"), P - 1)
        valid = index < jnp.minimum(cumulative[-1], batch)
        offset = index - (cumulative[rank] - demand[rank])
        slot = priority[rank]
        status = pool.status[slot]
        scoring = status == Status.SCORING
        step = jnp.where(
            scoring,
            pool.score_next[slot] + offset,
            jnp.where(status == Status.NEED_FINAL, plan.num_steps, pool.cursor[slot]),
        )
        # the batched forms index the pool directly (no per-query copy of a whole state)
        if _has_batched_forms(p):
            x = None
            answers = p.query_batch(pool.x, slot, step)
        else:
            x = gather(pool.x, slot)
            answers = jax.vmap(lambda x, k: p.query(x, k, 1))(x, step)
        defect = state.defect
        if self.validate:
            if x is None:
                codes, rows_hit = jax.vmap(_nonfinite_defect)(answers)
                bad = valid & (codes > 0)
                first = jnp.argmax(bad)
                record = jnp.stack(
                    [codes[first], rows_hit[first], step[first], pool.draw[slot[first]]]
                )
                defect = jnp.where(jnp.any(bad) & (defect[0] == 0), record, defect)
            else:
                defect = self._record_defect(state, valid, x, step, answers, slot, pool)

        # scoring queries: accumulate target log-densities (and rows for verification)
        in_block = valid & scoring & (step < pool.block_end[slot])
        safe_step = jnp.minimum(step, plan.num_steps - 1)
        if x is None:
            reduced, log_mu = p.score_batch(pool.x, slot, safe_step, answers)
        else:
            reduced = jax.vmap(p.reduce)(x, safe_step, answers)
            log_mu = jax.vmap(p.target_logp)(x, safe_step, reduced)
        target = jnp.where(in_block, slot, P)
        log_mu_block = (
            pool.log_mu_block
            + jax.ops.segment_sum(jnp.where(in_block, log_mu, 0.0), target, P + 1)[:P]
        )
        rows = self._write_window_rows(state.rows, pool, in_block, slot, step, reduced)
        taken = jax.ops.segment_sum(
            (valid & scoring).astype(jnp.int32), jnp.where(valid & scoring, slot, P), P + 1
        )[:P]
        single = valid & ~scoring
        answer_target = jnp.where(single, slot, P)
        new_status = jnp.where(status == Status.NEED_FINAL, Status.COMPLETE, status)
        stored = _pad_rows(answers, jax.tree.map(lambda leaf: leaf[0], pool.answer))
        pool = pool._replace(
            log_mu_block=log_mu_block,
            score_next=pool.score_next + taken,
            answer=scatter(pool.answer, answer_target, stored),
            has_answer=pool.has_answer.at[answer_target].set(True, mode="drop"),
            status=pool.status.at[answer_target].set(new_status, mode="drop"),
        )
        state = state._replace(pool=pool, rows=rows, defect=defect)
        return self._count(state, valid, slot, jnp.ones_like(step))

    def _write_window_rows(self, rows, pool, in_block, slot, step, reduced):
        """Store scored target rows of root windows in the per-draw verification buffers."""
        plan = self.plan
        if plan.policy.rule is None:
            return rows
        position = jnp.clip(step - pool.block_start[slot], 0, plan.window_size - 1)
        row_target = jnp.where(in_block & pool.verifying[slot], pool.draw[slot], plan.num_draws)
        return jax.tree.map(
            lambda buf, row: buf.at[row_target, position].set(row, mode="drop"), rows, reduced
        )

    def block_round(self, state: EngineState, lanes: int, window: bool) -> EngineState:
        """One ``score_block`` call per scoring block (root windows when ``window``, else
        recursion blocks): the target rows of steps ``a+1..a+m-1`` in one evaluation."""
        plan, p = self.plan, self.process
        P = plan.num_slots
        length = plan.policy.score_rows(window)
        pool = state.pool
        kind = pool.verifying if window else ~pool.verifying
        (slot,) = jnp.nonzero(self.block_demand(pool) & kind, size=lanes, fill_value=P)
        valid = slot < P
        slot = jnp.minimum(slot, P - 1)
        x = gather(pool.x, slot)
        first = pool.block_start[slot] + 1
        answers = jax.vmap(lambda x, a: p.score_block(x, a, length))(x, first)
        defect = self._record_defect(state, valid, x, first, answers, slot, pool)
        steps = first[:, None] + jnp.arange(length)[None, :]
        in_block = valid[:, None] & (steps < pool.block_end[slot][:, None])
        safe_steps = jnp.minimum(steps, plan.num_steps - 1)
        log_mu = jax.vmap(jax.vmap(p.target_logp, (None, 0, 0)))(x, safe_steps, answers)
        target = jnp.where(valid, slot, P)
        block_log_mu = jnp.sum(jnp.where(in_block, log_mu, 0.0), axis=1)
        log_mu_block = pool.log_mu_block + jax.ops.segment_sum(block_log_mu, target, P + 1)[:P]
        rows = state.rows
        if window:
            flat = lambda tree: jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), tree)
            rows = self._write_window_rows(
                rows,
                pool,
                in_block.reshape(-1),
                jnp.repeat(slot, length),
                steps.reshape(-1),
                flat(answers),
            )
        pool = pool._replace(
            log_mu_block=log_mu_block,
            score_next=pool.score_next.at[target].set(pool.block_end[slot], mode="drop"),
        )
        state = state._replace(pool=pool, rows=rows, defect=defect)
        used = jnp.clip(pool.block_end[slot] - first, 1, length)
        return self._count(state, valid, slot, used)

    def _bucketed(self, state: EngineState, count: Array, buckets, call) -> EngineState:
        """``call(state, size)`` in the smallest bucket size that holds ``count`` (skipped
        when ``count`` is 0)."""
        choice = jnp.sum(jnp.asarray(buckets)[:-1] < count)
        branches = [lambda s, b=b: call(s, b) for b in buckets]
        return jax.lax.cond(
            count > 0, lambda s: jax.lax.switch(choice, branches, s), lambda s: s, state
        )

    def round(self, state: EngineState) -> EngineState:
        state = self.transitions(state)
        plan, pool = self.plan, state.pool
        speculation = jnp.sum(self.speculation_demand(pool))
        steps = jnp.sum(self.step_demand(pool))
        blocks = self.block_demand(pool)
        total = speculation + steps + jnp.sum(blocks)
        active = state.started & ~state.done
        state = self._bucketed(state, speculation, plan.lane_buckets, self.speculation_round)
        state = self._bucketed(state, steps, plan.query_buckets, self.step_round)
        if plan.block_scoring:
            windows = jnp.sum(blocks & pool.verifying)
            state = self._bucketed(
                state,
                windows,
                _buckets(plan.verify_lanes, smallest=4),
                lambda s, b: self.block_round(s, b, True),
            )
            recursion = jnp.sum(blocks & ~pool.verifying)
            state = self._bucketed(
                state,
                recursion,
                plan.lane_buckets,
                lambda s, b: self.block_round(s, b, False),
            )
        has_demand = total > 0
        return state._replace(
            rounds=state.rounds + (active & has_demand).astype(jnp.int32),
            total_rounds=state.total_rounds + has_demand.astype(jnp.int32),
            stalled=~has_demand & ~jnp.all(state.done),
        )

    def run(self) -> Samples:
        plan, p = self.plan, self.process
        key_like = self.keys[0]
        x_like = jax.tree.map(
            lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(p.init, key_like)
        )
        answer_like = jax.tree.map(
            lambda s: jnp.zeros(s.shape, s.dtype),
            jax.eval_shape(lambda x: p.query(x, 0, plan.answer_rows), x_like),
        )
        reduced_like = jax.eval_shape(p.reduce, x_like, 0, answer_like)
        D = plan.num_draws
        rows = jax.tree.map(
            lambda s: jnp.zeros((D, plan.window_size) + s.shape, s.dtype), reduced_like
        )
        output_like = jax.eval_shape(p.output, x_like, answer_like if plan.final_query else None)
        state = EngineState(
            pool=empty_pool(plan.num_slots, key_like, x_like, answer_like),
            output=jax.tree.map(lambda s: jnp.zeros((D,) + s.shape, s.dtype), output_like),
            done=jnp.zeros(D, bool),
            started=jnp.zeros(D, bool),
            rounds=jnp.zeros(D, jnp.int32),
            queries=jnp.zeros(D, jnp.int32),
            conditionals=jnp.zeros(D, jnp.int32),
            rows=rows,
            defect=jnp.zeros(4, jnp.int32),
            next_draw=jnp.array(0, jnp.int32),
            total_rounds=jnp.array(0, jnp.int32),
            stalled=jnp.array(False),
        )

        def cond(state):
            running = ~jnp.all(state.done) & ~state.stalled & (state.defect[0] == 0)
            return running & (state.total_rounds < plan.max_rounds)

        state = jax.lax.while_loop(cond, self.round, state)
        jax.debug.callback(
            self._raise_if_failed, state.defect, state.stalled | ~jnp.all(state.done)
        )
        return Samples(state.output, state.rounds, state.queries, state.conditionals)

    def _raise_if_failed(self, defect, incomplete) -> None:
        """Host side: a defective oracle answer (validation), or an incomplete run (a bug)."""
        defect, incomplete = np.asarray(defect), np.asarray(incomplete)
        if defect.ndim > 1:  # under vmap: the first pool with a defect
            index = int(np.argmax(defect[..., 0].reshape(-1) > 0))
            defect = defect.reshape(-1, 4)[index]
        code, row, step, draw = (int(v) for v in defect)
        if code:
            raise OracleError(
                f"{_describe(self.process, code, row, step)} (draw {draw}); pass "
                "validate=False to skip these checks"
            )
        if np.any(incomplete):
            raise RuntimeError(
                "the autospeculation scheduler stopped before every draw was complete; this is "
                "a bug, please report it with the process and capacities used"
            )


def run(
    process,
    keys: Array,
    config: SamplerConfig | None = None,
    capacity: Capacity | None = None,
    *,
    validate: bool = True,
) -> Samples:
    """Draw ``len(keys)`` exact samples from ``process``, sharing one task pool.

    Draw ``i`` equals ``numpyro_autospec.reference.sample(process, keys[i], config).value``;
    ``rounds[i]`` and ``queries[i]`` are what the scheduler executed for it.  Pure JAX: works
    under ``jit`` and ``vmap`` (``process``, ``config`` and ``capacity`` are static).

    With ``validate`` (default) every oracle answer is checked inside the compiled program
    (``process.answer_defect``: for any-order oracles NaN, ``+inf`` and unnormalized rows of
    free sites; otherwise NaN and infinities); the run stops at the first defect and raises
    :class:`~numpyro_autospec.oracles.OracleError` naming the site, the row and the step.
    ``validate=False`` skips the checks (about one extra pass over each answer).

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    >>> samples = run(process, jax.random.split(jax.random.PRNGKey(0), 4))
    >>> samples.value.shape, samples.rounds.shape
    ((4, 64), (4,))
    """
    config = config or SamplerConfig()
    capacity = capacity or Capacity()
    keys = jnp.asarray(keys)
    if jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key):
        keys = jax.random.key_data(keys)
    if keys.ndim != 2:
        raise ValueError(f"keys must be a batch of PRNG keys of shape [D, 2], got {keys.shape}")
    plan_ = plan(process, config, capacity, keys.shape[0], keys[0])
    return _Scheduler(process, config, plan_, keys, validate).run()
