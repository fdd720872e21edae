"""Tuning knobs of the samplers: none changes the law of the output (every setting is an exact
sampler); they trade rounds against queries.

A draw's root walks the steps ``0..N-1`` left to right by a root policy of static sizes
(:meth:`SamplerConfig.root_policy`): **windows** draft steps from the speculation, score them in
one round and keep the longest valid prefix plus one corrected step (``assd``, ``block``);
**recursion blocks** run the paper's recursive speculative rejection sampling (docs/algorithm.md,
section 3; ``autospec``, ``sequential``).  The default ``autospec`` root on discrete processes
mixes both: windows verified by block verification (Sun et al., *Block Verification Accelerates
Speculative Decoding*, ICLR 2025) and a recursion block after a window that advanced little.  It is
exact (a verified prefix continued by an exact sampler of :math:`\\mu(\\cdot \\mid \\text{prefix})`,
each choice depending on the draw's past only) and keeps the paper's worst case: recursion blocks
of :math:`\\approx\\sqrt{N}/2` steps, whose speculation accepts with constant probability (TV
:math:`\\approx |S|/\\sqrt{N}`), give :math:`O(\\sqrt N)` iterations of :math:`\\tilde O(1)` rounds.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from jax.sharding import Mesh

from numpyro_autospec._core.root_policy import RootPolicy
from numpyro_autospec.errors import ConfigError

__all__ = ["METHODS", "Capacity", "SamplerConfig"]

#: ``autospec``: recursive speculative rejection sampling (the paper), by default with
#: block-verified root windows; ``assd``/``block``: self-speculative decoding with token/block
#: verification; ``sequential``: one step per round.
METHODS = ("autospec", "assd", "block", "sequential")

#: verification rules of root windows
RULES = ("token", "block")

#: default residual growth :math:`\rho` without discrete steps (diffusion): a rejected block of
#: small TV :math:`\delta` needs about :math:`1/\delta` trials, reached in half the batches of
#: :math:`\rho = 1` (``benchmarks/diffusion_rounds.py``)
DIFFUSION_GROWTH = 3.0


def _scaled(value: int | None, default: float, num_steps: int) -> int:
    """``value`` clipped to ``[1, N]``, or ``round(default * sqrt(N))`` when ``None``."""
    if value is None:
        value = round(default * math.sqrt(num_steps))
    return max(1, min(int(value), num_steps))


class SamplerConfig(NamedTuple):
    """Knobs of :func:`numpyro_autospec.reference.sample` and the engine.

    Attributes
    ----------
    method:
        one of :data:`METHODS`.
    block_size:
        ``assd``/``block``: the draft window (default ``2 sqrt(N)``).  ``autospec`` without
        root windows: recursion blocks of at most this many steps, left to right (exact:
        :math:`\\mu_{[a,c)} = \\mu_{[a,b)}\\,\\mu_{[b,c)\\mid[a,b)}`); ``None``: the whole sequence.
    growth:
        residual batch ``r`` runs :math:`\\lceil (1+\\rho)^r \\rceil` trials in parallel.
        ``None``: 1 on discrete processes, :data:`DIFFUSION_GROWTH` (3) otherwise.
    root_windows:
        ``autospec`` only: verified root windows, recursion blocks as fallback.  ``None``: on a
        :class:`~numpyro_autospec.processes.DiscreteStepProcess`, else the paper's root.
    window:
        first root window (default ``4 sqrt(N)``).
    window_growth:
        next window = ``window_growth`` x mean advance per window (``0``: fixed windows).
    min_window, max_window:
        window bounds (defaults ``sqrt(N)`` and ``N``).
    floor:
        recurse after a window that advanced fewer steps (default ``sqrt(N) / 4``).
    fallback:
        size of the recursion block after such a window (default ``sqrt(N) / 2``).

    Every configuration draws from the same law; a bad value is refused.

    >>> SamplerConfig(window=64).root_policy(1024).first_window
    64
    >>> SamplerConfig(method="assd", block_size=8).validate().method
    'assd'
    >>> SamplerConfig(method="gibbs").validate()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    numpyro_autospec.errors.ConfigError: method must be one of (...), got 'gibbs'
    """

    method: str = "autospec"
    block_size: int | None = None
    growth: float | None = None
    root_windows: bool | None = None
    window: int | None = None
    window_growth: int = 8
    min_window: int | None = None
    max_window: int | None = None
    floor: int | None = None
    fallback: int | None = None

    def root_policy(self, num_steps: int, discrete: bool = True) -> RootPolicy:
        """The root's sizes for ``num_steps`` steps of a process (``discrete`` or not)."""
        n = max(1, int(num_steps))
        self.validate()
        if self.method == "sequential":
            return RootPolicy(None, n, 0, n, n, 0, n, n)
        growth = self.residual_growth(discrete)
        if self.method in ("assd", "block"):
            if not discrete:
                raise ConfigError(
                    f"method={self.method!r} verifies steps one by one and needs a process with "
                    "discrete steps (DiscreteStepProcess); use method='autospec'"
                )
            k = _scaled(self.block_size, 2.0, n)
            rule = "token" if self.method == "assd" else "block"
            return RootPolicy(rule, k, 0, k, k, 0, 0, 1, growth)
        windows = discrete if self.root_windows is None else bool(self.root_windows)
        if windows and not discrete:
            raise ConfigError(
                "root_windows=True needs a process with discrete steps (DiscreteStepProcess)"
            )
        if not windows:
            block = n if self.block_size is None else max(1, min(int(self.block_size), n))
            return RootPolicy(None, block, 0, block, block, 0, block, 1, growth)
        min_window = _scaled(self.min_window, 1.0, n)
        max_window = n if self.max_window is None else max(1, min(int(self.max_window), n))
        min_window = min(min_window, max_window)
        first = max(min_window, min(_scaled(self.window, 4.0, n), max_window))
        floor = 0 if self.floor == 0 else _scaled(self.floor, 0.25, n)
        block = _scaled(self.fallback, 0.5, n)
        return RootPolicy(
            "block", first, int(self.window_growth), min_window, max_window, floor, block, 1, growth
        )

    def residual_growth(self, discrete: bool = True) -> float:
        """:math:`\\rho` of residual batches: ``growth``, by default 1 if ``discrete`` else 3."""
        if self.growth is not None:
            return float(self.growth)
        return 1.0 if discrete else DIFFUSION_GROWTH

    def validate(self) -> SamplerConfig:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {METHODS}, got {self.method!r}")
        for name in ("block_size", "window", "min_window", "max_window", "fallback"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise ConfigError(f"{name} must be >= 1 or None, got {value}")
        if self.floor is not None and int(self.floor) < 0:
            raise ConfigError(f"floor must be >= 0 or None, got {self.floor}")
        if int(self.window_growth) < 0 or int(self.window_growth) != self.window_growth:
            raise ConfigError(f"window_growth must be an integer >= 0, got {self.window_growth}")
        if self.growth is not None and not (self.growth > 0 and math.isfinite(self.growth)):
            raise ConfigError(f"growth must be a positive number, got {self.growth}")
        return self


class Capacity(NamedTuple):
    """Capacity limits of the engine: they may delay work (more rounds), never change the draws.

    Attributes
    ----------
    num_slots:
        residual trials held at once below the draws' roots.  Default: ``4 depth`` per draw
        (``depth``: nesting levels below the largest recursion block), at least 512 when the
        roots are recursion blocks, capped by ``memory_budget``.
    max_queries:
        oracle evaluations per round (the rest waits for the next round).  Default: no limit.
    max_transitions:
        tasks advanced per pass of the transitions.  Default: every task when the pool is small
        (at most 64 slots, 64 kB), else two per draw, moving at most about 1 MiB.
    chunk_size:
        oracle evaluations per batched call: a round of ``U`` evaluations makes
        ``ceil(U / chunk_size)`` calls.  Default: 4 for a block-form oracle, else 32.
    memory_budget:
        bytes the pool may use when sizes are chosen by default.
    mesh:
        a :class:`jax.sharding.Mesh` splitting every oracle call's batch (``None``: none).

    A starved pool takes more rounds, never other draws; a bad limit is refused.

    >>> import jax
    >>> from numpyro_autospec import engine, oracles, processes
    >>> process = processes.AnyOrderProcess(oracles.CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 2)
    >>> ample = engine.run(process, keys)
    >>> starved = engine.run(process, keys, capacity=Capacity(num_slots=4, max_queries=1))
    >>> bool((ample.value == starved.value).all()), bool((starved.rounds >= ample.rounds).all())
    (True, True)
    >>> engine.run(process, keys, capacity=Capacity(max_queries=0))
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.ConfigError: capacity.max_queries must be a positive integer, got 0
    """

    num_slots: int | None = None
    max_queries: int | None = None
    max_transitions: int | None = None
    chunk_size: int | None = None
    memory_budget: int = 1 << 30
    mesh: Mesh | None = None
