"""The root policy of a draw: how its root walks the steps in windows and recursion blocks
(docs/algorithm.md, section 4), resolved by ``SamplerConfig.root_policy``.  Its decisions work
on Python ints (the reference sampler) and traced integers (the engine) alike.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

__all__ = ["AfterWindow", "RootPolicy", "wants_lookahead"]


class RootPolicy(NamedTuple):
    """How the root of a draw walks the steps (resolved, static sizes).

    Attributes
    ----------
    rule:
        verification rule of the windows (``"token"``, ``"block"``; ``None``: no windows).
    first_window, min_window, max_window:
        size of the first window, and bounds of the later ones.
    window_growth:
        the next window is ``clip(window_growth * advanced // windows, min_window,
        max_window)`` (:meth:`next_window`); ``0`` keeps it fixed.
    floor:
        a window that advanced fewer steps (and did not keep all) is followed by a recursion
        block; ``0``: never.
    recursion_block, leaf_size:
        size of the recursion blocks (``0``: none); blocks of at most ``leaf_size`` steps are
        sampled step by step.
    growth:
        residual growth :math:`\\rho` (:func:`~numpyro_autospec._core.rejection.batch_size`).

    >>> from numpyro_autospec.config import SamplerConfig
    >>> policy = SamplerConfig().root_policy(1024)
    >>> policy.rule, policy.first_window, policy.min_window, policy.recursion_block
    ('block', 128, 32, 16)
    """

    rule: str | None
    first_window: int
    window_growth: int
    min_window: int
    max_window: int
    floor: int
    recursion_block: int
    leaf_size: int
    growth: float = 1.0

    @property
    def answer_rows(self) -> int:
        """Rows of a speculation answer: the largest block speculated."""
        return max(1, self.recursion_block, self.max_window if self.rule is not None else 1)

    def score_rows(self, window: bool) -> int:
        """Rows of one block-scoring call of a window or a recursion block."""
        largest = self.max_window if window else self.recursion_block
        return max(1, largest - 1)

    def falls_back(self, start, cursor, end):
        """Whether a window ``[start, end)`` verified up to ``cursor`` is followed by a
        recursion block."""
        return (cursor < end) & (cursor - start < self.floor) & (self.recursion_block > 0)

    def next_window(self, window, advanced, windows):
        """The window after ``windows`` windows that advanced ``advanced`` steps in all
        (``window`` itself when ``window_growth`` is 0 or no window is finished)."""
        if self.window_growth <= 0:
            return window
        if _is_python_int(window, advanced, windows):
            if windows <= 0:
                return window
            adapted = self.window_growth * advanced // windows
            return max(self.min_window, min(adapted, self.max_window))
        adapted = jnp.clip(
            self.window_growth * advanced // jnp.maximum(windows, 1),
            self.min_window,
            self.max_window,
        )
        return jnp.where(windows > 0, adapted, window)

    def after_window(self, window, advanced, windows, start, cursor, end, num_steps):
        """The decision after a window ``[start, end)`` verified up to ``cursor``:
        :meth:`falls_back`, and :meth:`next_window` counting the window and its recursion
        block as one."""
        fallback = self.falls_back(start, cursor, end)
        if _is_python_int(window, advanced, windows, start, cursor, end, num_steps):
            stop = min(cursor + self.recursion_block, num_steps) if fallback else cursor
        else:
            stop = jnp.where(
                fallback, jnp.minimum(cursor + self.recursion_block, num_steps), cursor
            )
        advanced, windows = advanced + stop - start, windows + 1
        return AfterWindow(fallback, self.next_window(window, advanced, windows), advanced, windows)


def wants_lookahead(end, num_steps: int, final_query: bool):
    """Whether a block ending at ``end`` also queries the next step (the lookahead): a step
    follows, or the process's output needs ``query(x, N)``.  Python ints or traced arrays.

    >>> wants_lookahead(3, 4, False), wants_lookahead(4, 4, False), wants_lookahead(4, 4, True)
    (True, False, True)
    """
    return (end < num_steps) | ((end == num_steps) & final_query)


def _is_python_int(*values) -> bool:
    return all(isinstance(value, int) for value in values)


class AfterWindow(NamedTuple):
    """:meth:`RootPolicy.after_window`: ``fallback``, the next ``window`` and the updated
    totals ``advanced`` and ``windows``.  A window of 128 that kept 3 falls back:

    >>> from numpyro_autospec.config import SamplerConfig
    >>> policy = SamplerConfig().root_policy(1024)
    >>> policy.after_window(128, 0, 0, 0, 3, 128, 1024)
    AfterWindow(fallback=True, window=152, advanced=19, windows=1)
    >>> policy.after_window(128, 0, 0, 0, 128, 128, 1024)
    AfterWindow(fallback=False, window=1024, advanced=128, windows=1)
    """

    fallback: Any
    window: Any
    advanced: Any
    windows: Any
