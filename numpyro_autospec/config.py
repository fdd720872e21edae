"""Tuning knobs of the samplers.  None of them changes the law of the output (every setting is
an exact sampler); they trade rounds against queries."""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["SamplerConfig", "METHODS", "VERIFY"]

#: ``autospec``: recursive speculative rejection sampling (the paper);
#: ``assd``: self-speculative decoding with site-by-site (token) verification (the peer);
#: ``block``: self-speculative decoding with block verification (Sun et al. 2025);
#: ``sequential``: one step per round.
METHODS = ("autospec", "assd", "block", "sequential")
VERIFY = {"autospec": "sequence", "assd": "token", "block": "block", "sequential": "sequence"}


class SamplerConfig(NamedTuple):
    """Knobs of :func:`numpyro_autospec.reference.sample` and the engine.

    Attributes
    ----------
    method:
        one of :data:`METHODS`.
    block_size:
        the root is processed left to right in blocks of at most this many steps (the draft
        window for ``assd``/``block``).  Larger blocks are split without speculating on them:
        exact, since :math:`\\mu_{[a,c)} = \\mu_{[a,b)}\\,\\mu_{[b,c)\\mid[a,b)}`, and it saves the
        rounds wasted on speculations that almost never accept (their TV distance to the target
        grows like :math:`|S|/\\sqrt{n}`).  ``None``: the whole sequence (the paper as written).
    leaf_size:
        blocks of at most this many steps are sampled sequentially (paper: 1).
    growth:
        residual batch ``r`` runs :math:`\\lceil (1+\\rho)^r \\rceil` trials in parallel.
    lookahead:
        also query the step right after a block in its scoring round, so that an accepted block
        hands the next block its speculation query for free (one query, zero rounds).
    """

    method: str = "autospec"
    block_size: int | None = None
    leaf_size: int = 1
    growth: float = 1.0
    lookahead: bool = True

    def resolved_block_size(self, num_steps: int) -> int:
        size = num_steps if self.block_size is None else int(self.block_size)
        if self.method == "sequential":
            size = num_steps
        return max(1, min(size, num_steps))

    def resolved_leaf_size(self, num_steps: int) -> int:
        return num_steps if self.method == "sequential" else max(1, int(self.leaf_size))

    def validate(self) -> SamplerConfig:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.block_size is not None and int(self.block_size) < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        if int(self.leaf_size) < 1:
            raise ValueError(f"leaf_size must be >= 1, got {self.leaf_size}")
        if not (self.growth > 0 and math.isfinite(self.growth)):
            raise ValueError(f"growth must be a positive number, got {self.growth}")
        return self
