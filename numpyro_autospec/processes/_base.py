"""The oracle-driven sequence ("process") abstraction (docs/algorithm.md, section 2).

A sample is built in :math:`N` steps :math:`k = 0, \\dots, N-1`; the state ``x`` holds the
steps done so far.  The samplers reach a model only through :class:`Process`, so they run
any-order autoregressive models and denoising diffusion alike (Anari et al., *Parallel Sampling
via Autospeculation*, arXiv:2511.07869, 2025).

Conventions
-----------
* ``query(x, k, num_rows)`` is **one** oracle evaluation on the prefix before step ``k``.  A
  *speculation answer* ``O_a = query(x, a, R)`` holds what the speculation of a block of up
  to ``R`` steps from ``a`` needs (any-order: ``[R, q]`` conditionals; diffusion: the drift
  :math:`f(t_a, y_a)`); ``R`` is static
  (:attr:`~numpyro_autospec._core.root_policy.RootPolicy.answer_rows`), and an answer of
  ``r < R`` rows is the leading part of the answer of ``R`` rows.
* ``reduce(x, k, answer)`` is the target row of step ``k``; ``target_logp`` /
  ``target_sample`` act on it, ``spec_sample`` / ``spec_logp`` on ``O_a`` for a block
  ``[a, a+m)``, ``m <= R`` (autospeculation: the same oracle, frozen at ``a``).
* ``a``, ``m`` and ``k`` may be traced: shapes are static, and all methods are pure.

Declared fast paths (class attributes): ``scores_blocks`` (:class:`BlockScoringProcess`),
``batched_queries`` (``query_batch`` / ``score_batch`` read the pool's stacked state in place)
``bounded_speculation`` (:class:`BoundedSpeculationProcess`) and ``discrete_steps``
(:class:`DiscreteStepProcess`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from jax import Array

__all__ = [
    "BlockScoringProcess",
    "BoundedSpeculationProcess",
    "DiscreteStepProcess",
    "Process",
    "has_discrete_steps",
]

State = Any
Answer = Any
Reduced = Any


@runtime_checkable
class Process(Protocol):
    """An oracle-driven sequence of ``num_steps`` steps (docs/algorithm.md, section 2).

    Sequential sampling by the chain rule, one single-step query per step:

    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(3, beta=0.5), 3, 2)
    >>> isinstance(process, Process), process.num_steps, process.final_query
    (True, 3, False)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> for k in range(process.num_steps):
    ...     reduced = process.reduce(x, k, process.query(x, k))
    ...     x = process.target_sample(jax.random.PRNGKey(k + 1), x, k, reduced)
    >>> process.output(x).shape
    (3,)
    """

    #: number of steps N (static)
    num_steps: int
    #: whether :meth:`output` needs ``query(x, N)`` (diffusion: the final denoised point)
    final_query: bool
    #: declared fast path: :meth:`score_block` scores a block in one evaluation
    scores_blocks: bool
    #: declared fast path: ``query_batch`` / ``score_batch`` read the pool in place
    batched_queries: bool
    #: declared fast path: ``spec_sample`` / ``spec_logp`` take a static ``max_length``
    bounded_speculation: bool
    #: declared: the steps take ``num_categories`` values and the speculation is a product
    #: over steps (:class:`DiscreteStepProcess`, what token and block verification need)
    discrete_steps: bool

    def init(self, key: Array) -> State:
        """Initial state (any-order: draws the random order and places observed values)."""

    def query(self, x: State, k: Array, num_rows: int = 1) -> Answer:
        """One oracle evaluation on the prefix before step ``k``, for steps ``k..k+num_rows-1``."""

    def reduce(self, x: State, k: Array, answer: Answer) -> Reduced:
        """What step ``k`` needs from ``query(x, k, .)``."""

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

    #: the exception of a defective answer (:class:`~numpyro_autospec.errors.OracleError`,
    #: :class:`~numpyro_autospec.errors.DenoiserError`)
    defect_error: type[Exception]

    def answer_defect(self, x: State, k: Array, answer: Answer) -> tuple[Array, Array]:
        """Traceable ``(code, row)`` of the first defect of an answer at step ``k`` (code 0:
        none; the codes of :mod:`numpyro_autospec.errors`)."""

    def describe_defect(self, code: int, row: int, step: int) -> str:
        """Host side: the error message for a defect found by :meth:`answer_defect`."""


@runtime_checkable
class BlockScoringProcess(Process, Protocol):
    """A process that declares ``scores_blocks = True``: row ``j`` of :meth:`score_block` is
    what the single-step query of step ``a + j`` reduces to, all in one evaluation.

    >>> import jax, numpy as np
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=0.5), 4, 2)
    >>> process.scores_blocks, isinstance(process, BlockScoringProcess)
    (True, True)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> rows = process.score_block(x, 1, 3)  # steps 1, 2, 3, each given its own prefix
    >>> single = [process.reduce(x, k, process.query(x, k)) for k in (1, 2, 3)]
    >>> rows.shape, bool(np.allclose(rows, np.stack(single), atol=1e-6))
    ((3, 2), True)
    """

    def score_block(self, x: State, a: Array, num_rows: int) -> Reduced:
        """The reduced answers of steps ``a..a+num_rows-1``, each given its own prefix."""

    def score_and_query(
        self, x: State, steps: Array, k: Array, num_rows: int
    ) -> tuple[Reduced, Answer]:
        """In one evaluation: the reduced answers of ``steps`` (as :meth:`score_block`'s
        rows) and ``query(x, k, num_rows)``."""

    def rows_defect(
        self, x: State, steps: Array, rows: Reduced, valid: Array
    ) -> tuple[Array, Array, Array]:
        """``(code, row, index)`` of the first defect among the ``valid`` rows of
        :meth:`score_and_query` (code 0: none)."""


@runtime_checkable
class BoundedSpeculationProcess(Process, Protocol):
    """A process that declares ``bounded_speculation = True``: a speculation of ``m`` steps
    computed on ``max_length >= m`` steps from the block's start equals the one on all ``N``
    (tested in ``tests/processes/test_diffusion.py``)."""

    def spec_sample(
        self,
        key: Array,
        x: State,
        a: Array,
        m: Array,
        answer: Answer,
        max_length: int | None = None,
    ) -> State:
        """:meth:`Process.spec_sample` on steps ``a .. a + max_length - 1`` only."""

    def spec_logp(
        self, x: State, a: Array, m: Array, answer: Answer, max_length: int | None = None
    ) -> Array:
        """:meth:`Process.spec_logp` on steps ``a .. a + max_length - 1`` only."""


@runtime_checkable
class DiscreteStepProcess(Process, Protocol):
    """A process whose steps take one of ``num_categories`` values and whose speculation is a
    product over steps, as token and block verification
    (:mod:`numpyro_autospec._core.verification`) need; it declares ``discrete_steps = True``.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=0.5), 4, 2)
    >>> isinstance(process, DiscreteStepProcess), process.num_categories
    (True, 2)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> answer = process.query(x, 0, 4)  # the speculation frozen at step 0
    >>> process.spec_reduce(x, 0, 2, answer).shape  # the law of step 2 under it
    (2,)
    >>> int(process.step_value(process.set_step_value(x, 2, jnp.int32(1)), 2))
    1
    """

    num_categories: int

    def spec_reduce(self, x: State, a: Array, k: Array, answer: Answer) -> Array:
        """Log-probabilities ``[q]`` of step ``k`` under the speculation frozen at
        ``answer = query(x, a, R)``."""

    def step_value(self, x: State, k: Array) -> Array:
        """The value taken at step ``k``."""

    def set_step_value(self, x: State, k: Array, value: Array) -> State:
        """``x`` with the value of step ``k`` replaced."""


def has_discrete_steps(process: Process) -> bool:
    """Whether ``process`` declares ``discrete_steps`` (:class:`DiscreteStepProcess`)."""
    return bool(process.discrete_steps)
