r"""Errors found inside a compiled program reach the caller as the project's own exceptions.

The engine validates every oracle answer inside the compiled program and turns the first
defect into an :class:`~numpyro_autospec.defects.OracleError` (a
:class:`~numpyro_autospec.denoisers.DenoiserError` for a denoiser) on the host, in a callback.
An exception raised in a callback aborts the program, and JAX hands the caller a
:class:`jax.errors.JaxRuntimeError` whose *last* line is the real error: ``except
OracleError`` cannot catch it.  This module carries the real exception past the compiled
program, the approach of Equinox's ``filter_jit`` with ``error_if`` (the host callback leaves
the exception in module state, a wrapper outside the program raises it again):

* **Deposits.**  The host callback stores the exception under an integer *ticket*
  (:func:`deposit`); the ticket is all the program needs to carry.
* **Carried failures** (how :class:`~numpyro_autospec.numpyro.AutospecKernel` reports through
  NumPyro's ``MCMC``, which jits its own loop).  While the kernel's step is traced inside
  :func:`collecting`, the engine does not abort: its callback deposits the exception and
  returns the ticket, and the step stores the tickets in the state as a :class:`Failure`.  A
  :class:`Failure` is a pytree node whose unflattening on the host, with a concrete non-zero
  ticket, raises the deposited exception: the first point outside the compiled program where
  the state is rebuilt (the end of ``MCMC.run``'s loop, or of each iteration with the
  progress bar) raises the project's exception.
* **Aborting programs** (``engine.run`` under the user's own ``jax.jit``).  The program still
  aborts, and the :class:`jax.errors.JaxRuntimeError` carries the message; :func:`project_error`
  finds the deposited exception behind it, and :func:`project_errors` (a context manager)
  re-raises it, ``from`` the runtime error::

      with project_errors():
          jax.jit(lambda keys: engine.run(process, keys))(keys)   # raises OracleError

Deposits are kept for the last :data:`MAX_DEPOSITS` failures.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.extend.core import get_opaque_trace_state

# the user-facing names; the deposit and collection machinery below is used by the engine and
# the kernel and documented for contributors
__all__ = ["Failure", "project_error", "project_errors"]

MAX_DEPOSITS = 256
"""How many deposited exceptions are kept (the oldest are forgotten first)."""

_lock = threading.Lock()
_deposits: collections.OrderedDict[int, BaseException] = collections.OrderedDict()
_tickets = itertools.count(1)
_trace_time = threading.local()  # per thread: the stack of open collecting() blocks


def _collectors() -> list[tuple[object, list[Array]]]:
    """The open :func:`collecting` blocks of this thread: (the trace each was opened in, its
    tickets), the innermost last."""
    if not hasattr(_trace_time, "collectors"):
        _trace_time.collectors = []
    return _trace_time.collectors


def deposit(error: BaseException) -> int:
    """Host side: keep ``error`` and return its ticket (a positive int32)."""
    with _lock:
        ticket = next(_tickets)
        _deposits[ticket] = error
        while len(_deposits) > MAX_DEPOSITS:
            _deposits.popitem(last=False)
    return ticket


def deposited(ticket: int) -> BaseException | None:
    """The exception deposited under ``ticket``, or ``None`` (forgotten, or no ticket)."""
    with _lock:
        return _deposits.get(int(ticket))


def raise_carried(tickets) -> None:
    """Host side: raise the exception of the first non-zero ticket of ``tickets`` (an int, a
    NumPy or a concrete JAX array of any shape); nothing when all are 0.

    :raises RuntimeError: when a ticket's exception has been forgotten (more than
        :data:`MAX_DEPOSITS` failures since).
    """
    flat = np.asarray(tickets).reshape(-1)
    failed = flat[flat != 0]
    if failed.size == 0:
        return
    error = deposited(int(failed[0]))
    if error is None:
        raise RuntimeError(
            f"a compiled program failed (ticket {int(failed[0])}) but its error was forgotten "
            f"after {MAX_DEPOSITS} later failures"
        )
    raise error.with_traceback(None)


# -- carried failures (the kernel's path) -------------------------------------------------
@contextlib.contextmanager
def collecting() -> Iterator[list[Array]]:
    """Trace time: engine runs traced inside this block deposit their failure and return its
    ticket instead of aborting the program; the yielded list receives the tickets (int32
    arrays, 0: no failure).  The caller must put them into its output (:func:`combine`,
    :class:`Failure`): a failure that is collected and dropped is silent."""
    tickets: list[Array] = []
    _collectors().append((get_opaque_trace_state(), tickets))
    try:
        yield tickets
    finally:
        _collectors().pop()


def is_collecting() -> bool:
    """Trace time: whether a :func:`collecting` block is open *in the current trace* (a
    nested trace, e.g. ``jax.eval_shape`` or a ``vmap`` inside the step, does not collect:
    its values cannot leave it)."""
    collectors = _collectors()
    return bool(collectors) and collectors[-1][0] == get_opaque_trace_state()


def collect(ticket: Array) -> None:
    """Trace time: hand ``ticket`` to the innermost :func:`collecting` block."""
    if not is_collecting():
        raise RuntimeError("collect() outside a collecting() block of the current trace")
    _collectors()[-1][1].append(ticket)


def combine(tickets: list[Array], shape: tuple[int, ...] = ()) -> Array:
    """The first non-zero ticket, entry by entry, of ``tickets`` (int32 arrays of ``shape``,
    or scalars: one ticket for the whole batch); 0 where none."""
    combined = jnp.zeros(shape, jnp.int32)
    for ticket in tickets:
        ticket = jnp.broadcast_to(jnp.asarray(ticket, jnp.int32), shape)
        combined = jnp.where(combined == 0, ticket, combined)
    return combined


@jax.tree_util.register_pytree_node_class
class Failure:
    """A pytree node holding the ticket(s) of a failed step (``int32``, 0: no failure).

    Rebuilding it on the host from a concrete non-zero ticket (which JAX does with the outputs
    of every compiled program) raises the deposited exception (:func:`raise_carried`).  Under
    a transformation (tracers, shape placeholders) it is an ordinary container.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import OracleError
    >>> jax.jit(lambda failure: failure)(Failure(jnp.int32(0)))  # no failure: a plain value
    Failure(Array(0, dtype=int32))
    >>> ticket = deposit(OracleError("site 'x': row 3 is NaN"))
    >>> try:
    ...     jax.jit(lambda failure: failure)(Failure(jnp.int32(ticket)))
    ... except OracleError as error:  # raised when the output is rebuilt on the host
    ...     print(error)
    site 'x': row 3 is NaN
    """

    __slots__ = ("ticket",)

    def __init__(self, ticket):
        self.ticket = ticket

    def tree_flatten(self):
        return (self.ticket,), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        (ticket,) = children
        if _is_concrete(ticket):
            raise_carried(ticket)
        return cls(ticket)

    def __repr__(self) -> str:
        return f"Failure({self.ticket!r})"


def carrying_failures(step: Callable) -> Callable:
    """``step`` with the failures of the engine runs it traces carried in its output.

    :param step: ``(state, *args) -> state`` on a ``NamedTuple`` state with fields ``rounds``
        (its shape is the batch shape of the state) and ``failure``.
    :returns: the same step, traced inside :func:`collecting`, whose output's ``failure`` is
        the :class:`Failure` of the input's ticket and the collected ones (:func:`combine`):
        a failure sticks, so that the state after a loop of steps (NumPyro's ``fori_collect``
        without progress bar) still carries the first one.
    """

    def step_carrying_failures(state, *args):
        with collecting() as tickets:
            new_state = step(state, *args)
        shape = jnp.shape(new_state.rounds)
        if state.failure is not None:
            tickets.insert(0, state.failure.ticket)
        return new_state._replace(failure=Failure(combine(tickets, shape)))

    return step_carrying_failures


def _is_concrete(value) -> bool:
    if isinstance(value, np.ndarray | np.integer | int):
        return True
    if isinstance(value, jax.core.Tracer) or not isinstance(value, jax.Array):
        return False
    return not value.is_deleted() and value.is_fully_addressable


# -- aborting programs (the user's own jit) -----------------------------------------------
def project_error(error: BaseException) -> BaseException | None:
    """The project's exception behind ``error``: ``error`` itself when it is already one,
    the deposited exception whose message a :class:`jax.errors.JaxRuntimeError` carries (an
    engine run that aborted a compiled program), else ``None``.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec import engine
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> def broken(x, mask):  # NaN rows: a defect found inside the compiled program
    ...     return jnp.full((2, 2), jnp.nan)
    >>> bad = AnyOrderProcess(broken, 2, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 2)
    >>> try:
    ...     jax.jit(lambda keys: engine.run(bad, keys))(keys)
    ... except jax.errors.JaxRuntimeError as runtime_error:
    ...     found = project_error(runtime_error)
    >>> type(found).__name__
    'OracleError'
    """
    from numpyro_autospec.defects import OracleError

    if isinstance(error, OracleError):
        return error
    if not isinstance(error, jax.errors.JaxRuntimeError):
        return None
    text = str(error)
    with _lock:
        candidates = list(reversed(_deposits.values()))
    for candidate in candidates:
        if f"{type(candidate).__name__}: {candidate}" in text:
            return candidate
    return None


@contextlib.contextmanager
def project_errors() -> Iterator[None]:
    """Re-raise a :class:`jax.errors.JaxRuntimeError` that carries one of the project's
    exceptions as that exception (``from`` the runtime error); other errors pass unchanged.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec import engine
    >>> from numpyro_autospec.oracles import OracleError
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> def broken(x, mask):  # NaN rows: a defect found inside the compiled program
    ...     return jnp.full((2, 2), jnp.nan)
    >>> bad = AnyOrderProcess(broken, 2, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 2)
    >>> try:
    ...     with project_errors():
    ...         jax.jit(lambda keys: engine.run(bad, keys))(keys)
    ... except OracleError as error:
    ...     print("caught", type(error).__name__)
    caught OracleError
    """
    try:
        yield
    except jax.errors.JaxRuntimeError as runtime_error:
        original = project_error(runtime_error)
        if original is None:
            raise
        raise original.with_traceback(None) from runtime_error
