"""Compiled engine programs shared by the engine's tests."""

from __future__ import annotations

import functools

import jax

from numpyro_autospec.engine import run
from numpyro_autospec.processes import AnyOrderProcess


@functools.cache
def compiled_run(
    num_positions, num_categories, config=None, capacity=None, *, validate=True, name="x"
):
    """``engine.run`` on ``AnyOrderProcess(oracle, num_positions, num_categories, name=name)``,
    compiled once per shape, config, capacity and ``validate``, the oracle an argument: its
    parameters are data, so the oracles of one shape and type (random tables, Ising chains,
    one oracle with different defects) share one compilation.  Called as
    ``compiled_run(...)(oracle, keys)``."""

    def draw(oracle, keys):
        process = AnyOrderProcess(oracle, num_positions, num_categories, name=name)
        return run(process, keys, config, capacity, validate=validate)

    return jax.jit(draw)
