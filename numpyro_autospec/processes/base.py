"""The oracle-driven sequence ("process") abstraction.

A sample is built in :math:`N` steps :math:`k = 0, \\dots, N-1`; the state ``x`` holds the
steps done so far.  Everything the samplers need from a model goes through the methods of
:class:`Process`, so the same reference sampler and the same round scheduler run any-order
autoregressive models (:mod:`numpyro_autospec.processes.any_order`) and denoising diffusion
(:mod:`numpyro_autospec.processes.diffusion`).  See ``ALGORITHM.md`` section 2 and
Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025).

Conventions
-----------
* ``query(x, k)`` is **one** oracle evaluation on the prefix of ``x`` before step ``k``; its
  answer ``O_k`` is a pytree (any-order: ``[n, q]`` log-marginals; diffusion: the drift).
* ``reduce(x, k, O_k)`` keeps what step ``k`` needs from ``O_k`` (any-order: the row of the site
  fixed at step ``k``; diffusion: ``O_k`` itself).  The engine stores reduced answers only.
* ``target_logp`` / ``target_sample`` act on reduced answers; ``spec_sample`` / ``spec_logp``
  act on the full answer ``O_a`` at the start of a block ``[a, a+m)`` (autospeculation: the
  same oracle, frozen at ``a``).
* ``a``, ``m`` and ``k`` may be traced integers: every method must have static shapes.
* All methods are pure; the samplers vmap them over batches of queries and draws.
* Optional batched forms for the engine, for processes with large states:
  ``query_batch(states, slot, k)`` (the answers ``query(states[slot[i]], k[i])``) and
  ``score_batch(states, slot, k, answers)`` (``reduce`` and ``target_logp`` of those steps),
  where ``states`` is the pool's stacked state; they let a query read only what it needs
  instead of a gathered copy of its slot's whole state.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from jax import Array

__all__ = ["Process", "DiscreteStepProcess", "has_discrete_steps"]

State = Any
Answer = Any
Reduced = Any


@runtime_checkable
class Process(Protocol):
    """An oracle-driven sequence of ``num_steps`` steps (ALGORITHM.md, section 2)."""

    #: number of steps N (static)
    num_steps: int
    #: whether :meth:`output` needs ``query(x, N)`` (diffusion: the final denoised point)
    final_query: bool

    def init(self, key: Array) -> State:
        """Initial state (any-order: draws the random order and places observed values)."""

    def query(self, x: State, k: Array) -> Answer:
        """One oracle evaluation on the prefix of ``x`` before step ``k``."""

    def reduce(self, x: State, k: Array, answer: Answer) -> Reduced:
        """What step ``k`` needs from ``query(x, k)``."""

    def target_logp(self, x: State, k: Array, reduced: Reduced) -> Array:
        """:math:`\\log \\mu(\\text{step } k \\text{ of } x \\mid \\text{prefix})`."""

    def target_sample(self, key: Array, x: State, k: Array, reduced: Reduced) -> State:
        """``x`` with step ``k`` drawn from :math:`\\mu(\\cdot \\mid \\text{prefix})`."""

    def spec_sample(self, key: Array, x: State, a: Array, m: Array, answer: Answer) -> State:
        """``x`` with steps ``a..a+m-1`` drawn at once from the speculation :math:`\\nu_S`."""

    def spec_logp(self, x: State, a: Array, m: Array, answer: Answer) -> Array:
        """:math:`\\log \\nu_S(\\text{steps } a..a+m-1 \\text{ of } x)`."""

    def output(self, x: State, final_answer: Answer | None) -> Any:
        """The sample returned to the user (``final_answer = query(x, N)`` if needed)."""


@runtime_checkable
class DiscreteStepProcess(Process, Protocol):
    """A process whose steps take one of ``num_categories`` values and whose speculation is a
    product over steps.  This is what token- and block-verification (the ASSD-style peers,
    :mod:`numpyro_autospec.verification`) need: explicit per-step distributions."""

    num_categories: int

    def spec_reduce(self, x: State, k: Array, answer: Answer) -> Array:
        """Log-probabilities ``[q]`` of step ``k`` under the speculation frozen at ``answer``."""

    def step_value(self, x: State, k: Array) -> Array:
        """The value taken at step ``k``."""

    def set_step_value(self, x: State, k: Array, value: Array) -> State:
        """``x`` with the value of step ``k`` replaced."""


def has_discrete_steps(process: Process) -> bool:
    """Whether ``process`` implements :class:`DiscreteStepProcess` (what verification needs)."""
    return all(
        callable(getattr(process, name, None))
        for name in ("spec_reduce", "step_value", "set_step_value")
    ) and hasattr(process, "num_categories")
