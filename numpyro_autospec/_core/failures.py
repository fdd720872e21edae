r"""Errors found inside a compiled program reach the caller as the project's own exceptions.

The engine validates every oracle answer inside the compiled program and records the first
defect as data: ``(code, row, step, draw)``.  Turning that record into an
:class:`~numpyro_autospec.errors.OracleError` (a
:class:`~numpyro_autospec.errors.DenoiserError` for a denoiser) happens on the host, where
the record arrives; no host callback is involved, so JAX's persistent compilation cache can
keep every program.

* A run returns its failure with its samples (``Samples.failure``), a :class:`Failure`: a
  pytree node whose static half (:class:`FailureReports`) knows how the run names its site and
  the user's function.  Rebuilding a :class:`Failure` on the host with a concrete failed record
  raises the exception: an eager ``engine.run`` raises it, and so does the output of your own
  ``jax.jit`` that returns the samples (return them, or their ``failure``, for the error to
  reach you).
* Inside the NumPyro kernel's step (:func:`collecting`), an engine run hands its record to the
  step (:func:`collect`), which stores the first failure in its state
  (:func:`carrying_failures`): the end of ``MCMC.run``'s loop, where the state is rebuilt on
  the host, raises it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.extend.core import get_opaque_trace_state

# the user-facing names; the collection machinery below is used by the engine and the kernel
__all__ = ["Failure", "FailureReports"]

_trace_time = threading.local()  # per thread: the stack of open collecting() blocks


def _collectors() -> list[tuple[object, list]]:
    """The open :func:`collecting` blocks of this thread: (the trace each was opened in, its
    collected failures), the innermost last."""
    if not hasattr(_trace_time, "collectors"):
        _trace_time.collectors = []
    return _trace_time.collectors


# -- carried failures (the kernel's path) -------------------------------------------------
#: the layout of a carried failure record: which engine run of the step failed (1-based, 0: no
#: failure), its defect (code, row, step, draw) and whether it stopped incomplete
RECORD_SIZE = 6


class FailureReports:
    """Host side: how the engine runs traced in one kernel's step describe their failures.

    The static half of a :class:`Failure` (its pytree auxiliary data, compared by identity, so
    the initial state and every step's state have the same structure).  Tracing the step
    records one *reporter* per engine run, ``(defect, incomplete) -> exception or None``; a
    carried record names its run by position.
    """

    __slots__ = ("reporters",)

    def __init__(self):
        self.reporters: tuple[Callable, ...] = ()

    def error(self, records) -> BaseException | None:
        """The exception of the first failed record of ``records`` (``int32[..., 6]``)."""
        flat = np.asarray(records).reshape(-1, RECORD_SIZE)
        failed = flat[flat[:, 0] != 0]
        if failed.size == 0:
            return None
        run, *defect, incomplete = (int(value) for value in failed[0])
        if run > len(self.reporters):
            return RuntimeError(f"a failure of engine run {run} of a step that traced fewer runs")
        return self.reporters[run - 1](np.asarray(defect, np.int32), bool(incomplete))

    def __repr__(self) -> str:
        return f"FailureReports({len(self.reporters)} engine runs)"

    def __reduce__(self):
        # pickled (a pickled MCMC or state) without the reporters, which hold the traced
        # processes; a failure is raised before its state can be pickled
        return (FailureReports, ())


@contextlib.contextmanager
def collecting() -> Iterator[list[tuple[Array, Array, Callable]]]:
    """Trace time: engine runs traced inside this block hand their failure over as data
    instead of aborting the program; the yielded list receives ``(defect, incomplete,
    reporter)`` per run (:func:`collect`).  The caller must put them into its output
    (:func:`carrying_failures`): a failure that is collected and dropped is silent."""
    collected: list[tuple[Array, Array, Callable]] = []
    _collectors().append((get_opaque_trace_state(), collected))
    try:
        yield collected
    finally:
        _collectors().pop()


def is_collecting() -> bool:
    """Trace time: whether a :func:`collecting` block is open *in the current trace* (a
    nested trace, e.g. ``jax.eval_shape`` or a ``vmap`` inside the step, does not collect:
    its values cannot leave it)."""
    collectors = _collectors()
    return bool(collectors) and collectors[-1][0] == get_opaque_trace_state()


def collect(defect: Array, incomplete: Array, reporter: Callable) -> None:
    """Trace time: hand an engine run's failure to the innermost :func:`collecting` block.

    :param defect: ``int32[4]``, (code, row, step, draw) of the first defective answer (code 0:
        none).
    :param incomplete: bool, whether the run stopped before every draw was complete.
    :param reporter: host side, ``(defect, incomplete) -> exception or None``.
    """
    if not is_collecting():
        raise RuntimeError("collect() outside a collecting() block of the current trace")
    _collectors()[-1][1].append((defect, incomplete, reporter))


def first_failure(collected: list[tuple[Array, Array, Callable]], shape=()) -> Array:
    """The record (``int32[*shape, 6]``) of the first failed run of ``collected``."""
    record = jnp.zeros((*shape, RECORD_SIZE), jnp.int32)
    for run, (defect, incomplete, _) in enumerate(collected, start=1):
        defect = jnp.broadcast_to(jnp.asarray(defect, jnp.int32), (*shape, 4))
        incomplete = jnp.broadcast_to(jnp.asarray(incomplete), shape)
        failed = (defect[..., 0] != 0) | incomplete
        row = jnp.concatenate(
            [
                jnp.full((*shape, 1), run, jnp.int32),
                defect,
                incomplete[..., None].astype(jnp.int32),
            ],
            axis=-1,
        )
        take = (record[..., 0] == 0) & failed
        record = jnp.where(take[..., None], row, record)
    return record


@jax.tree_util.register_pytree_node_class
class Failure:
    """A pytree node carrying the first failure of a kernel's engine runs as data.

    ``record`` is ``int32[..., 6]`` (:data:`RECORD_SIZE`): the failed run (1-based, 0: no
    failure), its defect code, row, step and draw, and whether it stopped incomplete;
    ``reports`` (:class:`FailureReports`, the static half) turns a record into the project's
    exception.  Rebuilding a :class:`Failure` on the host from a concrete failed record (which
    JAX does with the outputs of every compiled program) raises that exception; under a
    transformation (tracers, shape placeholders) it is an ordinary container.  No host
    callback is involved, so the compiled program can be kept by JAX's persistent compilation
    cache.

    Example
    -------
    >>> import jax, numpy as np
    >>> from numpyro_autospec.errors import OracleError
    >>> reports = FailureReports()
    >>> reports.reporters = (lambda defect, incomplete: OracleError(f"site 'x': row {defect[1]}"),)
    >>> jax.jit(lambda failure: failure)(Failure.none(reports))  # no failure: a plain value
    Failure(Array([0, 0, 0, 0, 0, 0], dtype=int32))
    >>> record = np.array([1, 1, 3, 0, 0, 0], np.int32)  # run 1: NaN (code 1) in row 3
    >>> try:
    ...     jax.jit(lambda failure: failure)(Failure(record, reports))
    ... except OracleError as error:  # raised when the output is rebuilt on the host
    ...     print(error)
    site 'x': row 3
    """

    __slots__ = ("record", "reports")

    def __init__(self, record, reports: FailureReports):
        self.record = record
        self.reports = reports

    @classmethod
    def none(cls, reports: FailureReports, shape: tuple[int, ...] = ()) -> Failure:
        """No failure (``int32`` zeros of shape ``(*shape, 6)``)."""
        return cls(jnp.zeros((*shape, RECORD_SIZE), jnp.int32), reports)

    @property
    def failed(self) -> Array:
        """Per batch entry: whether a failure is carried."""
        return self.record[..., 0] != 0

    def tree_flatten(self):
        return (self.record,), self.reports

    @classmethod
    def tree_unflatten(cls, reports, children):
        (record,) = children
        if _is_concrete(record):
            error = reports.error(record)
            if error is not None:
                raise error.with_traceback(None)
        return cls(record, reports)

    def check(self) -> None:
        """Raise the carried exception now when the record is concrete (on the host) and
        failed; do nothing under a transformation."""
        if _is_concrete(self.record):
            error = self.reports.error(self.record)
            if error is not None:
                raise error.with_traceback(None)

    def __repr__(self) -> str:
        return f"Failure({self.record!r})"


def carrying_failures(step: Callable) -> Callable:
    """``step`` with the failures of the engine runs it traces carried in its output.

    :param step: ``(state, *args) -> state`` on a ``NamedTuple`` state with fields ``rounds``
        (its shape is the batch shape of the state) and ``failure`` (a :class:`Failure`).
    :returns: the same step, traced inside :func:`collecting`, whose output's ``failure`` is
        the input's failure if it carries one, else the first failure of the collected runs
        (:func:`first_failure`): a failure sticks, so that the state after a loop of steps
        (NumPyro's ``fori_collect`` without progress bar) still carries the first one.
    """

    def step_carrying_failures(state, *args):
        with collecting() as collected:
            new_state = step(state, *args)
        reports = state.failure.reports
        reports.reporters = tuple(reporter for _, _, reporter in collected)
        record = first_failure(collected, jnp.shape(new_state.rounds))
        record = jnp.where(state.failure.failed[..., None], state.failure.record, record)
        return new_state._replace(failure=Failure(record, reports))

    return step_carrying_failures


def _is_concrete(value) -> bool:
    """Whether ``value`` is a record on the host: an array whose last axis holds a record
    (JAX also rebuilds pytrees with other leaves: axis numbers, placeholders, tracers)."""
    if isinstance(value, jax.core.Tracer):
        return False
    if isinstance(value, jax.Array):
        if value.is_deleted() or not value.is_fully_addressable:
            return False
    elif not isinstance(value, np.ndarray):
        return False
    return value.ndim >= 1 and value.shape[-1] == RECORD_SIZE
