"""The round scheduler: recursive speculative rejection sampling as one compiled program.

docs/algorithm.md, section 4: the trials of the residual loop run *independently*, each at its own
pace, so nested ``vmap`` (lockstep lanes) cannot keep the paper's parallel time.  The engine
keeps a fixed-capacity pool of tasks (:mod:`numpyro_autospec.engine.pool`) and repeats

1. **transitions** -- advance every task that needs no oracle answer, in bounded *micro-steps*
   (:func:`micro_step`) while one would move anything (:func:`pending`): cancel orphans, take
   trial reports and resolve waiting tasks (:mod:`~numpyro_autospec.engine.trials`), verify
   root windows (:mod:`~numpyro_autospec.engine.windows`), the per-slot transitions
   (:mod:`~numpyro_autospec.engine.transitions`), write completed draws, and admit new trials
   and draws under the deadlock-freedom invariant (:func:`~numpyro_autospec.engine.trials.admit`);
2. **one round** -- gather every ready query of every task of every draw into one batch, call
   the oracle once on it (vmapped) and scatter the answers back
   (:mod:`~numpyro_autospec.engine.rounds`).

Rounds and queries are counted per draw, as they are executed.  All randomness is drawn from
keys derived exactly as in :mod:`numpyro_autospec.reference` (via
:mod:`numpyro_autospec.rejection`), so the draws do not depend on the capacities at all, and
with enough capacity the rounds equal the reference's.  The sizes of a run are resolved once,
at trace time (:mod:`~numpyro_autospec.engine.plan`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec import errors
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine.keys import engine_keys
from numpyro_autospec.engine.plan import RECURSION_ROOT_SLOTS, Capacity, Plan, plan
from numpyro_autospec.engine.pool import Status, gather, scatter
from numpyro_autospec.engine.rounds import query_round
from numpyro_autospec.engine.state import (
    Context,
    EngineState,
    Samples,
    initial_state,
    make_context,
)
from numpyro_autospec.engine.transitions import advance, advancing, scored
from numpyro_autospec.engine.trials import (
    admit,
    cancel_orphans,
    candidates,
    orphans,
    report_trials,
    reporting,
    resolvable,
    resolve_waiting,
)
from numpyro_autospec.engine.windows import verify_windows

__all__ = [
    "Capacity",
    "Samples",
    "run",
    "plan",
    "Plan",
    "RECURSION_ROOT_SLOTS",
    "micro_step",
    "transitions_pending",
    "pending",
    "settle",
]


def verifiable(plan: Plan, pool) -> Array:
    """Root windows whose scoring round is done, which :func:`micro_step` verifies (none
    without root windows)."""
    if plan.policy.rule is None:
        return jnp.zeros(pool.status.shape, bool)
    return scored(plan, pool) & pool.verifying


def completing(pool) -> Array:
    """Roots whose output :func:`complete_draws` writes."""
    return pool.status == Status.COMPLETE


def complete_draws(context: Context, pool, output, done):
    """Write the outputs of up to ``max_transitions`` completed draws and free their slots;
    returns ``(pool, output, done, any completed)``."""
    plan = context.plan
    num_slots = plan.num_slots
    (slot,) = jnp.nonzero(completing(pool), size=plan.max_transitions, fill_value=num_slots)
    valid = slot < num_slots

    def complete(carry):
        pool, output, done = carry
        roots = gather(pool, jnp.minimum(slot, num_slots - 1))
        final = roots.answer if plan.final_query else None
        outputs = jax.vmap(context.process.output)(roots.x, final)
        draw_target = jnp.where(valid, roots.draw, plan.num_draws)
        output = scatter(output, draw_target, outputs)
        done = done.at[draw_target].set(True, mode="drop")
        freed = jnp.where(valid, slot, num_slots)
        pool = pool._replace(
            status=pool.status.at[freed].set(Status.FREE, mode="drop"),
            epoch=pool.epoch.at[freed].add(1, mode="drop"),
        )
        return pool, output, done

    pool, output, done = jax.lax.cond(
        jnp.any(valid), complete, lambda carry: carry, (pool, output, done)
    )
    return pool, output, done, jnp.any(valid)


def micro_step(context: Context, state: EngineState) -> tuple[EngineState, Array]:
    """One pass of every transition that needs no oracle answer; returns the state and
    whether anything moved."""
    plan = context.plan
    num_slots, lanes = plan.num_slots, plan.max_transitions
    pool = state.pool
    # 1. cancel orphans: tasks whose parent resolved, moved on or was freed
    pool, cancelled = cancel_orphans(pool, num_slots)
    # 2. reports: finished trials tell their parent; the smallest accepted index wins
    pool, reported = report_trials(pool, num_slots, lanes)
    # 3. waiting tasks: resolve (winner known, all earlier trials rejected) or next batch
    pool, resolved = resolve_waiting(context, pool)
    # 4. root windows whose scoring round is done: verification (per draw)
    verified = jnp.array(False)
    if plan.policy.rule is not None:
        pool, verified = verify_windows(context, pool, state.rows, verifiable(plan, pool))
    # 5. transitions of up to max_transitions tasks each
    pool, moved = advance(context, pool)
    # 6. completed draws: write their outputs and free their slots
    pool, output, done, completed = complete_draws(context, pool, state.output, state.done)
    # 7. spawn residual trials and start new draws, keeping the pool deadlock-free
    admission = admit(context, pool, state)
    progressed = cancelled | reported | resolved | moved | verified | completed | admission.admitted
    state = state._replace(
        pool=admission.pool,
        output=output,
        done=done,
        started=admission.started,
        next_draw=admission.next_draw,
    )
    return state, progressed


def transitions_pending(context: Context, pool) -> Array:
    """Whether a step of :func:`micro_step` other than admission would move a task: the masks
    of those steps, in its order, on a pool that none of the earlier steps changes (each
    step does nothing when this is false)."""
    plan = context.plan
    resolved, exhausted = resolvable(context, pool)
    moves = (
        orphans(pool, plan.num_slots)
        | reporting(pool)
        | resolved
        | exhausted
        | verifiable(plan, pool)
        | advancing(plan, pool)
        | completing(pool)
    )
    return jnp.any(moves)


def pending(context: Context, state: EngineState) -> Array:
    """Whether :func:`micro_step` would move anything (exactly: it reports progress if and
    only if this is true): :func:`transitions_pending`, or a trial or draw to admit
    (:func:`~numpyro_autospec.engine.trials.candidates`)."""
    admissions = candidates(context, state.pool, state.next_draw).admitted
    return transitions_pending(context, state.pool) | jnp.any(admissions)


def settle(context: Context, state: EngineState) -> EngineState:
    """Micro-steps while one would move anything (:func:`pending`; bounded).  Asking first
    spares each round the micro-step that finds nothing to do (on an accelerator, its
    launches and host-read conditionals)."""

    def cond(carry):
        state, count = carry
        return pending(context, state) & (count < 100_000)

    def body(carry):
        state, count = carry
        state, _ = micro_step(context, state)
        return state, count + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.array(0)))
    return state


def one_round(context: Context, state: EngineState) -> EngineState:
    """The transitions, then one round of queries."""
    return query_round(context, settle(context, state))


def run_loop(context: Context) -> Samples:
    """Rounds until every draw is complete (or a defect, a stall or the round limit), then
    report a failed run (:func:`report_failure`)."""
    max_rounds = context.plan.max_rounds

    def cond(state):
        running = ~jnp.all(state.done) & ~state.stalled & (state.defect[0] == 0)
        return running & (state.total_rounds < max_rounds)

    state = jax.lax.while_loop(cond, functools.partial(one_round, context), initial_state(context))
    report_failure(context.process, state.defect, state.stalled | ~jnp.all(state.done))
    return Samples(state.output, state.rounds, state.queries, state.conditionals)


def report_failure(process, defect: Array, incomplete: Array) -> None:
    """Trace time: hand a failed run's exception (:func:`failure_error`) to the host.

    Inside an :func:`numpyro_autospec.errors.collecting` block (the NumPyro kernel's step) the
    program goes on: the defect record is collected as data, with the process's reporter, to
    be raised where the state reaches the host (no host callback).  Otherwise the program
    aborts in a callback, behind a conditional on the failure (a run that succeeds makes no
    round trip to the host: 0.2-0.3 ms a call on the CPU, most of a one-draw call at small
    ``n``); the exception is deposited first, so that
    :func:`numpyro_autospec.errors.project_errors` can raise it again outside the user's
    ``jit`` (called eagerly, the exception itself propagates).
    """
    if errors.is_collecting():
        errors.collect(defect, incomplete, functools.partial(failure_error, process))
    else:
        # the host is called only when the run failed: a successful draw pays no round trip
        # (under ``vmap`` the conditional becomes a select and the callback sees every pool)
        failed = jnp.any(defect[..., 0] != 0) | jnp.any(incomplete)
        jax.lax.cond(
            failed,
            lambda: jax.debug.callback(
                functools.partial(raise_if_failed, process), defect, incomplete
            ),
            lambda: None,
        )


def raise_if_failed(process, defect, incomplete) -> None:
    """Host side: raise the exception of a failed run (:func:`failure_error`), deposited
    first (:func:`numpyro_autospec.errors.deposit`)."""
    error = failure_error(process, defect, incomplete)
    if error is not None:
        errors.deposit(error)
        raise error


def failure_error(process, defect, incomplete) -> Exception | None:
    """Host side: the exception of a run, or ``None`` when it succeeded.

    A defective oracle answer (``defect = (code, row, step, draw)``, the first one recorded;
    under ``vmap`` the first pool with a defect) gives ``process.defect_error`` (an
    :class:`~numpyro_autospec.oracles.OracleError`; a
    :class:`~numpyro_autospec.denoisers.DenoiserError` for a diffusion) with the process's
    sentence naming the site, the user's function, the row and the step; an incomplete run
    (a stall, the round limit) is a bug of the scheduler: :class:`RuntimeError`.
    """
    defect, incomplete = np.asarray(defect), np.asarray(incomplete)
    if defect.ndim > 1:  # under vmap: the first pool with a defect
        index = int(np.argmax(defect[..., 0].reshape(-1) > 0))
        defect = defect.reshape(-1, 4)[index]
    code, row, step, draw = (int(value) for value in defect)
    if code:
        return process.defect_error(
            f"{process.describe_defect(code, row, step)} (draw {draw}); pass "
            "validate=False to skip these checks"
        )
    if np.any(incomplete):
        return RuntimeError(
            "the autospeculation scheduler stopped before every draw was complete; this is "
            "a bug, please report it with the process and capacities used"
        )
    return None


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
    ``validate=False`` skips the checks (about one extra pass over each answer).  Called
    eagerly, the error is raised as is; under your own ``jax.jit`` JAX reports it as a
    :class:`jax.errors.JaxRuntimeError` carrying the message, which
    :func:`numpyro_autospec.errors.project_errors` turns back into the
    :class:`~numpyro_autospec.oracles.OracleError`.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> samples = run(process, jax.random.split(jax.random.PRNGKey(0), 2))
    >>> samples.value.shape, samples.rounds.shape
    ((2, 16), (2,))
    """
    config = config or SamplerConfig()
    capacity = capacity or Capacity()
    keys = engine_keys(keys)
    context = make_context(
        process, plan(process, config, capacity, keys.shape[0], keys[0]), keys, validate
    )
    with errors.project_errors():
        return run_loop(context)
