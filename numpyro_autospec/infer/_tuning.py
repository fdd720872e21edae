r"""Warmup that tunes the speculation: :class:`AutospecKernel`'s ``num_warmup`` draws choose the
engine's knobs, which are then frozen for sampling.

Every :class:`~numpyro_autospec.config.SamplerConfig` is an exact sampler (Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869; docs/algorithm.md): the knobs only
trade rounds against queries.  Warmup therefore spends its draws measuring, not adapting a
chain: the warmup draws are split evenly between a few candidate configurations
(:func:`candidate_configs`: the user's configuration and variants of the initial window, the
window growth, the fallback threshold and the recursion block size), each candidate draws its
share in one engine pool, and the candidate with the fewest mean rounds per draw wins when it
beats the user's configuration by more than :data:`MARGIN` standard errors (ties and noise keep
the user's configuration).  The chosen configuration is fixed before the first sampling
iteration, so the draws after warmup are exact draws of the model (the warmup draws are
discarded, as with any MCMC warmup).

Why measure, not trace the knobs: the knobs are *static* (they size the engine's buffers and
depth tables), so each candidate is one compilation; the candidates are few (at most four)
and a tuning run costs about as much as the compilations of the sampling program itself.  The
warmup draws use keys folded from the chain's key (:data:`WARMUP_STREAM`), never the keys of
the sampling iterations.
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
"""A candidate replaces the user's configuration only when its mean rounds per draw are lower
by more than this many standard errors of the difference."""

MAX_DRAWS_PER_CANDIDATE = 128
"""Warmup draws measured per candidate (more warmup iterations are not drawn)."""

MIN_DRAWS_PER_CANDIDATE = 16
"""Fewer warmup draws per candidate than this: no tuning (a handful of draws cannot show a
difference of two standard errors, and each candidate costs a compilation)."""

WARMUP_STREAM = 0x7E57
"""The warmup draws' keys are ``split(fold_in(key, WARMUP_STREAM), draws)``."""


class Candidate(NamedTuple):
    """One candidate configuration and what its warmup draws cost.

    :ivar name: a short label (``"given"``, ``"wide"``, ``"cautious"``, ``"paper"``).
    :ivar config: the configuration.
    :ivar rounds: rounds of each warmup draw.
    :ivar queries: queries of each warmup draw.
    """

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
    """Result of :func:`tune`: the chosen configuration and every candidate's measurement
    (the first candidate is the user's configuration)."""

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
    r"""The configurations warmup compares for a process of ``num_steps`` steps, the user's
    first; all exact.

    For ``method="autospec"`` (sizes in units of :math:`s = \sqrt N`; the defaults are a first
    window of :math:`4s`, growth 8, fallback threshold :math:`s/4`, recursion blocks of
    :math:`s/2`):

    * ``"wide"``: a first window of the whole sequence and growth 16, for near-product targets
      on which verification keeps long prefixes (one window can finish a draw);
    * ``"cautious"``: a first window of :math:`s`, growth 4, fallback after windows that
      advanced fewer than :math:`s/2` steps into recursion blocks of :math:`s`, for targets on
      which windows keep little and the recursion should take over early;
    * ``"paper"``: the paper's recursion alone in root blocks of :math:`8s` with residual
      growth :math:`\rho = 3` (its best setting in ``docs/benchmarks.md``).

    For ``"assd"`` and ``"block"``: windows of :math:`s` (``"narrow"``) and :math:`N`
    (``"wide"``).  ``"sequential"`` has nothing to tune.  Only knobs the user left at their
    defaults are varied: a knob set by the user is kept in every candidate.
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
    """The candidate with the fewest mean rounds, if it beats the first (the user's
    configuration) by more than ``margin`` standard errors of the difference; else the
    first.  Ties in rounds are broken by mean queries."""
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
    """Choose a configuration from ``num_warmup`` warmup draws.

    :param measure: ``measure(config, keys) -> (rounds, queries)`` per draw, one draw per key
        (:class:`AutospecKernel` draws the model; the benchmark draws one process).
    :param config: the user's configuration (candidate ``"given"``).
    :param num_steps: the number of steps the sizes of the candidates refer to (the largest
        oracle site of the model).
    :param rng_key: the chain's key (the warmup draws use their own stream, :func:`warmup_keys`).
    :param num_warmup: warmup draws, split evenly between the candidates (at most
        :data:`MAX_DRAWS_PER_CANDIDATE` each); fewer than :data:`MIN_DRAWS_PER_CANDIDATE` per
        candidate: no tuning.
    """
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
    """``(rounds, queries)`` of one joint draw of ``model`` per key under ``config``, every
    draw of an oracle site in one engine pool (as ``chain_method="vectorized"``).

    :param inspection: the model's :class:`~numpyro_autospec.infer.ModelInspection`.
    :raises OracleError: a defective oracle answer found inside the compiled program.
    """
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
