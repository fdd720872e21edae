r"""Errors found inside a compiled program reach the caller as the project's own exceptions.

The engine records the first defective answer as data, ``(code, row, step, draw)``; the host
turns it into an :class:`~numpyro_autospec.errors.OracleError` (or
:class:`~numpyro_autospec.errors.DenoiserError`) with no host callback, so JAX's persistent
compilation cache keeps every program.

* A run returns a :class:`Failure` with its samples: rebuilding it on the host from a failed
  record raises the exception (an eager run, or the output of the user's ``jax.jit``).
* Inside the NumPyro kernel's step (:func:`collecting`), engine runs hand their records to the
  step (:func:`collect`), which carries the first in its state (:func:`carrying_failures`).
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

__all__ = ["Failure", "FailureReports"]

_trace_time = threading.local()  # per thread: the stack of open collecting() blocks


def _collectors() -> list[tuple[object, list]]:
    """This thread's open :func:`collecting` blocks, ``(trace, collected)``, innermost last."""
    if not hasattr(_trace_time, "collectors"):
        _trace_time.collectors = []
    return _trace_time.collectors


#: a record: the failed run (1-based, 0: none), its defect (code, row, step, draw), incomplete
RECORD_SIZE = 6


class FailureReports:
    """The static half of a :class:`Failure` (compared by identity): one *reporter*
    ``(defect, incomplete) -> exception or None`` per engine run traced in a step."""

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
        # pickled without the reporters, which hold the traced processes
        return (FailureReports, ())


@contextlib.contextmanager
def collecting() -> Iterator[list[tuple[Array, Array, Callable]]]:
    """Trace time: engine runs inside this block hand their ``(defect, incomplete,
    reporter)`` to the yielded list (:func:`collect`); the caller must output them."""
    collected: list[tuple[Array, Array, Callable]] = []
    _collectors().append((get_opaque_trace_state(), collected))
    try:
        yield collected
    finally:
        _collectors().pop()


def is_collecting() -> bool:
    """Trace time: whether a :func:`collecting` block is open *in the current trace*."""
    collectors = _collectors()
    return bool(collectors) and collectors[-1][0] == get_opaque_trace_state()


def collect(defect: Array, incomplete: Array, reporter: Callable) -> None:
    """Trace time: hand an engine run's ``defect`` (``int32[4]``: code, row, step, draw),
    ``incomplete`` flag and host-side ``reporter`` to the innermost :func:`collecting` block."""
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
    """A pytree node carrying a failure record ``int32[..., 6]`` (:data:`RECORD_SIZE`) and
    its :class:`FailureReports`; rebuilt on the host from a concrete failed record, it raises
    the exception (under a transformation it is an ordinary container).

    Example
    -------
    >>> import jax, numpy as np
    >>> from numpyro_autospec.errors import OracleError
    >>> reports = FailureReports()
    >>> reports.reporters = (lambda defect, incomplete: OracleError(f"site 'x': row {defect[1]}"),)
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
        """Raise the carried exception if the record is concrete and failed."""
        if _is_concrete(self.record):
            error = self.reports.error(self.record)
            if error is not None:
                raise error.with_traceback(None)

    def __repr__(self) -> str:
        return f"Failure({self.record!r})"


def carrying_failures(step: Callable) -> Callable:
    """``step`` with the failures of the engine runs it traces carried in its output.

    :param step: ``(state, *args) -> state`` on a ``NamedTuple`` with fields ``rounds`` (the
        batch shape) and ``failure`` (a :class:`Failure`).
    :returns: the step, whose output's ``failure`` is the input's if failed (a failure
        sticks), else the first of the collected runs.
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
    """Whether ``value`` is a record on the host (JAX also rebuilds with other leaves)."""
    if isinstance(value, jax.core.Tracer):
        return False
    if isinstance(value, jax.Array):
        if value.is_deleted() or not value.is_fully_addressable:
            return False
    elif not isinstance(value, np.ndarray):
        return False
    return value.ndim >= 1 and value.shape[-1] == RECORD_SIZE
