"""Compiled engine programs shared by the engine's tests, and many draws in calls of one
compiled program."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from numpyro_autospec.engine import Samples, run
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


def draws_in_calls(draw: Callable[[np.ndarray], Samples], keys, keys_per_call: int) -> Samples:
    """One draw per key, in calls of ``keys_per_call`` keys to ``draw`` (a jitted
    ``engine.run``: every call one compiled program, whatever the number of keys), the last
    call padded with copies of the first key (a draw depends on its key alone); every field
    of the calls' :class:`~numpyro_autospec.engine.Samples` concatenated as a NumPy array and
    cut to ``len(keys)`` (a ``None`` field stays ``None``).  The keys may be raw or typed."""
    keys = jnp.asarray(keys)
    num_draws = len(keys)
    padded = jnp.concatenate([keys, jnp.repeat(keys[:1], -num_draws % keys_per_call, axis=0)])
    calls = [draw(padded[i : i + keys_per_call]) for i in range(0, len(padded), keys_per_call)]
    return jax.tree.map(
        lambda *fields: np.concatenate([np.asarray(f) for f in fields])[:num_draws], *calls
    )
