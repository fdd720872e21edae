"""A run's failure, carried as data to where its result reaches the host.

A run records the first defective oracle answer inside its compiled program, as
``(code, row, step, draw)``, and whether it stopped before every draw was done.  No host
callback is involved (a program with one cannot be kept by JAX's persistent compilation cache):

* inside the NumPyro kernel's step (:func:`numpyro_autospec._core.failures.collecting`) the record
is
  handed to the step, which carries it in its state;
* otherwise the run returns it in :attr:`Samples.failure
  <numpyro_autospec.engine.Samples>`, a :class:`~numpyro_autospec._core.failures.Failure`: rebuilt
  on
  the host with a failed record (the output of a compiled program that returns it, or an eager
  call), it raises the run's exception, an :class:`~numpyro_autospec.errors.OracleError`
  naming the site, the function, the row and the step.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core import failures

__all__ = ["failure_error", "carried_failure"]


def failure_error(process, defect, incomplete) -> Exception | None:
    """Host side: the exception of a run, or ``None`` when it succeeded.

    A defective oracle answer (``defect = (code, row, step, draw)``, the first one recorded;
    under ``vmap`` the first run with a defect) gives ``process.defect_error`` with the
    process's sentence naming the site, the user's function, the row and the step; a run that
    stopped before every draw was done (a stall, the pass limit) is a bug of the engine:
    :class:`RuntimeError`.
    """
    defect, incomplete = np.asarray(defect), np.asarray(incomplete)
    if defect.ndim > 1:
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
            "the autospeculation engine stopped before every draw was complete; this is "
            "a bug, please report it with the process and capacities used"
        )
    return None


def carried_failure(process, defect: Array, incomplete: Array) -> failures.Failure | None:
    """Trace time: the run's failure, as a :class:`~numpyro_autospec._core.failures.Failure` to
    return
    with its samples, or ``None`` inside a :func:`~numpyro_autospec._core.failures.collecting` block
    (the record is handed to it)."""
    reporter = functools.partial(failure_error, process)
    if failures.is_collecting():
        failures.collect(defect, incomplete, reporter)
        return None
    reports = failures.FailureReports()
    reports.reporters = (reporter,)
    record = failures.first_failure([(defect, incomplete, reporter)], jnp.shape(incomplete))
    return failures.Failure(record, reports)
