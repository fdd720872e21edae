"""A run's failure (first defect ``(code, row, step, draw)``, early stop) carried as data, not
by a host callback (that would keep the program out of the compilation cache): handed to a
``collecting`` block (the NumPyro kernel), else returned in ``Samples.failure``."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core import failures

__all__ = ["failure_error", "carried_failure"]


def failure_error(process, defect, incomplete) -> Exception | None:
    """Host side: a run's exception, or ``None``: ``process.defect_error`` for the first
    ``defect = (code, row, step, draw)`` (under ``vmap``: the first run with one), a
    :class:`RuntimeError` (an engine bug) for an ``incomplete`` run."""
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
    """Trace time: the run's :class:`~numpyro_autospec._core.failures.Failure`, or ``None``
    inside a ``collecting`` block (which takes the record)."""
    reporter = functools.partial(failure_error, process)
    if failures.is_collecting():
        failures.collect(defect, incomplete, reporter)
        return None
    reports = failures.FailureReports()
    reports.reporters = (reporter,)
    record = failures.first_failure([(defect, incomplete, reporter)], jnp.shape(incomplete))
    return failures.Failure(record, reports)
