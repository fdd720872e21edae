r"""What NumPyro's progress bar says while the sampler compiles.

:class:`~numpyro.infer.MCMC` traces and compiles the kernel's step inside the first iteration of
its progress bar, so that iteration holds the compile time: for the autospeculation engine
(Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869) seconds, not the
milliseconds of a draw (``benchmarks/first_draw.py``, docs/benchmarks.md), and a bar reading
``1/60 [00:18<18:24, 18.73s/it]`` announces an eighteen-minute wait that will not happen.

When :class:`~numpyro_autospec.infer.AutospecKernel`'s step is traced (a compilation
follows), :func:`announce_compilation` sets the description of the open progress bar to
``compiling ...``; when the compilation ends (JAX's backend-compile event,
:mod:`jax.monitoring`), the bar's clock is moved forward by the compile time, so its elapsed
time and rates count draws only, and one line above the bar says how long the compilation took.
Without an open bar (``progress_bar=False``) nothing is printed: the announcement goes to the
``numpyro_autospec.infer._progress`` logger at ``INFO`` level only.
"""

from __future__ import annotations

import logging

import tqdm.std
from jax import monitoring

__all__ = ["BACKEND_COMPILE_EVENT", "announce_compilation", "open_progress_bar"]

#: the :mod:`jax.monitoring` event recorded at the end of each XLA compilation
#: (``jax._src.dispatch.BACKEND_COMPILE_EVENT``), with its duration in seconds
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

logger = logging.getLogger(__name__)

#: ``(bar, what)`` announced and waiting for the end of their compilation
_waiting: list[tuple[tqdm.std.tqdm, str]] = []
_listening: list[bool] = []


def open_progress_bar() -> tqdm.std.tqdm | None:
    """The most recently started open ``tqdm`` bar (NumPyro's while ``MCMC.run`` iterates
    with ``progress_bar=True``), or ``None``."""
    bars = [bar for bar in list(getattr(tqdm.std.tqdm, "_instances", ())) if not bar.disable]
    return max(bars, key=lambda bar: bar.start_t, default=None)


def announce_compilation(what: str) -> None:
    """Say on the open progress bar (if any) that ``what`` is compiling, and take the
    compile time out of the bar's clock when it ends."""
    logger.info("compiling %s", what)
    bar = open_progress_bar()
    if bar is None:
        return
    if not _listening:
        monitoring.register_event_duration_secs_listener(_compiled)
        _listening.append(True)
    bar.set_description(f"compiling {what}", refresh=True)
    _waiting.append((bar, what))


def _compiled(event: str, duration: float, **kwargs) -> None:
    """:mod:`jax.monitoring` listener: the first compilation after an announcement is the
    announced one."""
    if event != BACKEND_COMPILE_EVENT or not _waiting:
        return
    bar, what = _waiting.pop(0)
    _waiting.clear()
    logger.info("compiled %s in %.1f s", what, duration)
    if bar.disable:  # closed meanwhile
        return
    bar.start_t += duration
    bar.last_print_t += duration
    bar.write(f"compiled {what} in {duration:.1f} s (not counted in the rates below)", file=bar.fp)
