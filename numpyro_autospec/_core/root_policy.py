"""The root policy of a draw: how its root walks the steps ``0..N-1`` in windows and recursion
blocks (docs/algorithm.md, section 4), resolved once from a
:class:`~numpyro_autospec.config.SamplerConfig` by its ``root_policy`` method.

The one implementation of the policy's decisions, on Python ints (the reference sampler) and on
traced integer arrays (the engine).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

__all__ = ["AfterWindow", "RootPolicy"]


class RootPolicy(NamedTuple):
    """How the root of a draw walks the steps (resolved, static sizes).

    Attributes
    ----------
    rule:
        verification rule of the windows (``"token"``, ``"block"``), or ``None`` for a root
        made of recursion blocks only.
    first_window:
        size of the first window.
    window_growth:
        after each window (and its recursion block, if any) the next window is
        ``clip(window_growth * advanced // windows, min_window, max_window)`` where
        ``advanced / windows`` is the mean advance per window so far; ``0`` keeps it fixed.
    min_window, max_window:
        bounds of the window (``max_window`` is the size of the verification buffers).
    floor:
        a window that advanced fewer steps than this (and did not keep all its steps) is
        followed by a recursion block; ``0``: never.
    recursion_block:
        size of the recursion blocks (the largest block the recursion runs on; ``0``: none).
    leaf_size:
        recursion blocks of at most this many steps are sampled step by step.
    growth:
        residual growth :math:`\\rho`: batch ``r`` of a residual loop runs
        :math:`\\lceil (1+\\rho)^r \\rceil` trials (never changes the law).

    Example: the resolved root of the default configuration for 1024 steps.

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
        """Rows of a speculation answer: the largest block speculated (a window or a
        recursion block); any-order answers hold the conditionals of that many steps."""
        return max(1, self.recursion_block, self.max_window if self.rule is not None else 1)

    def score_rows(self, window: bool) -> int:
        """Rows of one block-scoring call (steps ``a+1..a+m-1`` of a block of at most
        ``max_window`` (window) or ``recursion_block`` steps)."""
        largest = self.max_window if window else self.recursion_block
        return max(1, largest - 1)

    def falls_back(self, start, cursor, end):
        """Whether a window ``[start, end)`` verified up to ``cursor`` (the new cursor) is
        followed by a recursion block: it did not keep all its steps and advanced fewer than
        ``floor``.  Python ints or traced integer arrays."""
        return (cursor < end) & (cursor - start < self.floor) & (self.recursion_block > 0)

    def next_window(self, window, advanced, windows):
        """The window after ``windows`` windows that advanced ``advanced`` steps in all:
        ``clip(window_growth * advanced // windows, min_window, max_window)``, ``window``
        itself when ``window_growth`` is 0 or no window is finished.  Python ints or traced
        integer arrays."""
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
        """The root's decision after a window ``[start, end)`` of size ``window`` verified up
        to ``cursor``, given ``advanced`` steps in ``windows`` earlier windows: whether a
        recursion block ``[cursor, min(cursor + recursion_block, num_steps))`` follows
        (:meth:`falls_back`), and the next window, counting the window and its recursion
        block (if any) as one (:meth:`next_window`).  The one implementation of the root
        policy, shared by :mod:`numpyro_autospec.reference` (Python ints) and the engine
        (traced arrays)."""
        fallback = self.falls_back(start, cursor, end)
        if _is_python_int(window, advanced, windows, start, cursor, end, num_steps):
            stop = min(cursor + self.recursion_block, num_steps) if fallback else cursor
        else:
            stop = jnp.where(
                fallback, jnp.minimum(cursor + self.recursion_block, num_steps), cursor
            )
        advanced, windows = advanced + stop - start, windows + 1
        return AfterWindow(fallback, self.next_window(window, advanced, windows), advanced, windows)


def _is_python_int(*values) -> bool:
    return all(isinstance(value, int) for value in values)


class AfterWindow(NamedTuple):
    """:meth:`RootPolicy.after_window`: ``fallback`` (a recursion block follows), the next
    ``window`` and the updated totals ``advanced`` (steps) and ``windows`` (count).

    Example: a first window of 128 steps that kept only 3 falls back to a recursion block of
    16 steps; one that kept all 128 grows the next window to the maximum.

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
