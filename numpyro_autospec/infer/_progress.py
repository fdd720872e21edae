r"""What NumPyro's progress bar says while the sampler compiles (seconds, for the engine of
Anari et al., arXiv:2511.07869): :func:`announce_compilation` shows ``compiling ...`` on the open
bar and, at JAX's backend-compile event, takes the compile time out of the bar's clock.
"""

from __future__ import annotations

import logging

import tqdm.std
from jax import monitoring

__all__ = ["BACKEND_COMPILE_EVENT", "announce_compilation", "open_progress_bar"]

#: the :mod:`jax.monitoring` event ending each XLA compilation, with its duration in seconds
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

logger = logging.getLogger(__name__)

_waiting: list[tuple[tqdm.std.tqdm, str]] = []
_listening: list[bool] = []


def open_progress_bar() -> tqdm.std.tqdm | None:
    """The most recently started open ``tqdm`` bar, or ``None``."""
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
    """Listener: the first compilation after an announcement is the announced one."""
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
