"""Engine draws of an any-order oracle for the oracles' goodness-of-fit tests."""

from __future__ import annotations

import jax

from numpyro_autospec.engine import run
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.programs import draws_in_calls


def engine_draws(oracle, num_positions: int, num_draws: int, seed: int, chunks: int = 3):
    """``num_draws`` draws of ``engine.run`` (default config) on ``[2]^num_positions``, in
    ``chunks`` calls of one compiled program (:func:`~tests.engine.programs.draws_in_calls`)."""
    process = AnyOrderProcess(oracle, num_positions, 2)
    keys = jax.random.split(jax.random.PRNGKey(seed), num_draws)
    draws = jax.jit(lambda k: run(process, k))
    return draws_in_calls(draws, keys, -(-num_draws // chunks)).value
