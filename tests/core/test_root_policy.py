"""The root policy is implemented once (``RootPolicy.after_window``): the same decisions on
Python ints (the reference sampler) and on traced int32 arrays (the engine)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from numpyro_autospec._core.root_policy import RootPolicy
from numpyro_autospec.config import SamplerConfig

POLICIES = [
    SamplerConfig().root_policy(64),
    SamplerConfig(window=2, min_window=1, floor=4, fallback=3).root_policy(16),
    SamplerConfig(window=1, min_window=1, window_growth=2, floor=2).root_policy(16),
    SamplerConfig(window_growth=0, floor=0).root_policy(16),
    RootPolicy("block", 4, 3, 2, 9, 3, 0, 1),  # no recursion block: never falls back
]


def test_after_window_is_the_same_on_ints_and_arrays():
    num_steps = 16
    cases = [
        (window, advanced, windows, start, cursor, min(start + window, num_steps))
        for window, advanced, windows, start in itertools.product(
            (1, 3, 8), (0, 5, 13), (0, 1, 4), (0, 6, 12)
        )
        for cursor in range(start + 1, min(start + window, num_steps) + 1)
    ]
    columns = [jnp.asarray(column, jnp.int32) for column in zip(*cases, strict=True)]
    for policy in POLICIES:
        traced = jax.jit(lambda *args, policy=policy: policy.after_window(*args, num_steps))(
            *columns
        )
        for index, case in enumerate(cases):
            expected = policy.after_window(*case, num_steps)
            got = tuple(np.asarray(field)[index].item() for field in traced)
            assert got == tuple(expected), (policy, case)


def test_after_window_rule():
    policy = RootPolicy("block", 8, 2, 2, 10, 3, 4, 1)
    # kept 1 of 8 (< floor 3): a recursion block of 4 follows; the advance counts it
    after = policy.after_window(8, 0, 0, 0, 1, 8, 100)
    assert after == (True, 10, 5, 1)  # clip(2 * 5 // 1, 2, 10) = 10
    # kept all: no fallback, window 2 * 8 // 1 clipped to 10
    assert policy.after_window(8, 0, 0, 0, 8, 8, 100) == (False, 10, 8, 1)
    # a partial window that advanced >= floor: no fallback
    assert policy.after_window(8, 10, 2, 0, 4, 8, 100) == (False, 9, 14, 3)
    # the recursion block is cut at the end of the steps
    assert policy.after_window(8, 0, 0, 96, 98, 100, 100) == (True, 8, 4, 1)
