"""``prefix_sum`` and ``prefix_max`` compute ``jnp.cumsum`` and ``lax.cummax`` (integers exactly,
floats to rounding), along any axis, under ``jit`` and ``vmap``, and take short windows: a long
axis is cut into blocks of about sqrt(n) steps, so that no windowed reduction of the lowered
program (XLA:CPU's quadratic-work cumulative sum) is longer than about sqrt(n)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from numpyro_autospec._core.prefix_sums import prefix_max, prefix_sum

SHAPES = st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple)


@settings(max_examples=12, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**16), data=st.data())
def test_prefix_sum_of_integers_equals_cumsum(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    values = np.random.default_rng(seed).integers(-5, 6, size=shape).astype(np.int32)
    np.testing.assert_array_equal(prefix_sum(values, axis=axis), np.cumsum(values, axis=axis))


@settings(max_examples=12, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**16), data=st.data())
def test_prefix_max_equals_cummax(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    values = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    np.testing.assert_array_equal(
        prefix_max(values, axis=axis), np.maximum.accumulate(values, axis=axis)
    )


def test_prefix_sum_of_floats_under_jit_and_vmap_equals_cumsum_to_rounding():
    values = jax.random.normal(jax.random.PRNGKey(0), (4, 1000, 3))
    batched = jax.jit(jax.vmap(lambda v: prefix_sum(v, axis=0)))(values)
    np.testing.assert_allclose(
        batched, np.cumsum(np.asarray(values, np.float64), axis=1), atol=2e-4
    )


def longest_window(function, values) -> int:
    """The longest window of a windowed reduction in the lowered program of ``function``."""
    text = jax.jit(function).lower(values).as_text()
    windows = re.findall(r"window_dimensions = array<i64: ([0-9, ]+)>", text)
    return max((max(int(size) for size in window.split(",")) for window in windows), default=1)


def test_windows_are_about_sqrt_n_long():
    values = jnp.ones((4096, 8))
    for function in (prefix_sum, prefix_max):
        assert longest_window(function, values) <= 2 * 64
    # the library's own operations take one window of the whole axis: the check above can fail
    assert longest_window(lambda v: jnp.cumsum(v, axis=0), values) == 4096
