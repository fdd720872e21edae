r"""Warmup that tunes the speculation: every ``SamplerConfig`` is exact (Anari et al., *Parallel
Sampling via Autospeculation*, arXiv:2511.07869), so ``AutospecKernel``'s warmup draws measure a
few candidate configurations (:func:`candidate_configs`) and keep the one with the fewest mean
rounds per draw if it beats the user's by more than :data:`MARGIN` standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.infer._steps import AutospecState, autospec_step, pooled_autospec_step

__all__ = [
    "MARGIN",
    "MAX_DRAWS_PER_CANDIDATE",
    "MIN_DRAWS_PER_CANDIDATE",
    "WARMUP_STREAM",
    "Candidate",
    "Tuning",
    "candidate_configs",
    "choose",
    "measure_model",
    "tune",
    "warmup_keys",
]

MARGIN = 2.0
"""Standard errors by which a candidate must beat the user's mean rounds per draw."""

MAX_DRAWS_PER_CANDIDATE = 128
"""Warmup draws measured per candidate (more warmup iterations are not drawn)."""

MIN_DRAWS_PER_CANDIDATE = 16
"""Fewer warmup draws per candidate than this: no tuning."""

WARMUP_STREAM = 0x7E57
"""The warmup draws' keys are ``split(fold_in(key, WARMUP_STREAM), draws)``."""


class Candidate(NamedTuple):
    """A candidate configuration and the ``rounds`` and ``queries`` of its warmup draws."""

    name: str
    config: SamplerConfig
    rounds: np.ndarray
    queries: np.ndarray

    @property
    def mean_rounds(self) -> float:
        return float(np.mean(self.rounds))

    @property
    def standard_error(self) -> float:
        """Standard error of :attr:`mean_rounds` (0 for a single draw)."""
        if self.rounds.size < 2:
            return 0.0
        return float(np.std(self.rounds, ddof=1) / math.sqrt(self.rounds.size))


class Tuning(NamedTuple):
    """Result of :func:`tune`: the chosen configuration and every candidate's measurement."""

    config: SamplerConfig
    chosen: str
    candidates: tuple[Candidate, ...]

    def table(self) -> str:
        """One line per candidate: mean rounds (standard error) and mean queries per draw."""
        lines = []
        for candidate in self.candidates:
            mark = "*" if candidate.name == self.chosen else " "
            lines.append(
                f"{mark} {candidate.name:9s} rounds {candidate.mean_rounds:8.2f} "
                f"({candidate.standard_error:.2f})  queries {np.mean(candidate.queries):9.1f}"
            )
        return "\n".join(lines)


def candidate_configs(
    config: SamplerConfig, num_steps: int
) -> tuple[tuple[str, SamplerConfig], ...]:
    r"""The configurations warmup compares for ``num_steps`` steps, the user's (``"given"``)
    first, varying only knobs left at their defaults.  With :math:`s = \sqrt N`, for
    ``"autospec"``: ``"wide"`` (first window :math:`N`, growth 16), ``"cautious"`` (window
    :math:`s`, growth 4, fallback below :math:`s/2` into blocks of :math:`s`) and ``"paper"``
    (recursion alone, root blocks :math:`8s`, :math:`\rho = 3`); for ``"assd"`` and ``"block"``:
    windows of :math:`s` (``"narrow"``) and :math:`N` (``"wide"``).
    """
    n = max(1, int(num_steps))

    def scaled(scale: float) -> int:
        return max(1, min(n, round(scale * math.sqrt(n))))

    default = SamplerConfig()
    candidates: list[tuple[str, SamplerConfig]] = [("given", config)]
    if config.method == "autospec" and config.root_windows is not False:
        free_window = config.window is None and config.window_growth == default.window_growth
        if free_window:
            candidates.append(("wide", config._replace(window=n, window_growth=16)))
        if free_window and config.floor is None and config.fallback is None:
            cautious = config._replace(
                window=scaled(1.0), window_growth=4, floor=scaled(0.5), fallback=scaled(1.0)
            )
            candidates.append(("cautious", cautious))
        if config.root_windows is None and config.block_size is None:
            paper = config._replace(root_windows=False, block_size=scaled(8.0), growth=3.0)
            candidates.append(("paper", paper))
    elif config.method in ("assd", "block") and config.block_size is None:
        candidates.append(("narrow", config._replace(block_size=scaled(1.0))))
        candidates.append(("wide", config._replace(block_size=n)))
    return tuple(candidates)


def warmup_keys(rng_key, num_draws: int):
    """Keys of the warmup draws: a stream of their own, folded from the chain's key."""
    return jax.random.split(jax.random.fold_in(rng_key, WARMUP_STREAM), num_draws)


def choose(candidates: Sequence[Candidate], margin: float = MARGIN) -> Candidate:
    """The candidate with the fewest mean rounds (then queries) if it beats the first by more
    than ``margin`` standard errors of the difference, else the first."""
    given = candidates[0]
    best = min(candidates, key=lambda c: (c.mean_rounds, float(np.mean(c.queries))))
    if best is given:
        return given
    error = math.hypot(given.standard_error, best.standard_error)
    return best if given.mean_rounds - best.mean_rounds > margin * error else given


def tune(
    measure: Callable[[SamplerConfig, jax.Array], tuple[np.ndarray, np.ndarray]],
    config: SamplerConfig,
    num_steps: int,
    rng_key,
    num_warmup: int,
) -> Tuning:
    """Choose a configuration from ``num_warmup`` warmup draws split between the candidates;
    ``measure(config, keys) -> (rounds, queries)`` draws once per key."""
    options = [(name, option.validate()) for name, option in candidate_configs(config, num_steps)]
    per_candidate = min(int(num_warmup) // len(options), MAX_DRAWS_PER_CANDIDATE)
    if len(options) == 1 or per_candidate < MIN_DRAWS_PER_CANDIDATE:
        return Tuning(config, "given", ())
    keys = warmup_keys(rng_key, per_candidate)
    measured = []
    for name, option in options:
        rounds, queries = measure(option, keys)
        measured.append(Candidate(name, option, np.asarray(rounds), np.asarray(queries)))
    best = choose(measured)
    return Tuning(best.config, best.name, tuple(measured))


def measure_model(
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    inspection,
    capacity,
    config: SamplerConfig,
    keys: jax.Array,
) -> tuple[np.ndarray, np.ndarray]:
    """``(rounds, queries)`` of one pooled joint draw of ``model`` per key under ``config``."""
    num_draws = keys.shape[0]
    zero = jnp.zeros(num_draws, jnp.int32)
    z = {
        name: jnp.broadcast_to(value, (num_draws,) + jnp.shape(value))
        for name, value in inspection.z_like.items()
    }
    states = AutospecState(zero, z, zero, zero, keys)

    def one(state):
        return autospec_step(
            state, model, model_args, model_kwargs, config=config, capacity=capacity
        )

    def pooled(states):
        return pooled_autospec_step(
            states, model, model_args, model_kwargs, config=config, capacity=capacity
        )

    step = jax.vmap(one) if any(inspection.oracle_parents.values()) else pooled
    drawn = jax.jit(step)(states)
    return np.asarray(drawn.rounds), np.asarray(drawn.queries)
