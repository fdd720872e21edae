"""The engine's keys (:mod:`numpyro_autospec.engine._keys`) give JAX's threefry bits.

The engine draws with typed keys of ``STRAIGHT_THREEFRY`` (the threefry hash as straight-line
``jax.numpy`` code); the reference sampler draws with the keys as given.  Every random value
the package makes (key splits, ``fold_in``, uniform, Gumbel, categorical, permutation...) must
be the same bits under both, or the engine's draws would no longer be the reference's key for
key (``tests/engine/test_scheduler.py`` checks those too).  The hash itself is compared with
JAX's, and a hash with one rotation wrong fails that comparison.  Keys that the straight hash
would not reproduce (another implementation, the non-partitionable threefry) are used as
given: a run with them draws the same law (a chi-square, and a broken verifier rejected by
it), though not the reference's bits (under those keys, a draw of ``k`` random values is not
the first ``k`` of a longer draw, which the engine's batched draws rely on for equality).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry_2x32

from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.engine import _keys as engine_keys_module
from numpyro_autospec.engine._keys import STRAIGHT_THREEFRY, engine_keys
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.broken import break_block_verification
from tests.engine.programs import draws_in_calls
from tests.gof import assert_gof, chisquare_gof, encode_configurations
from tests.tables import probabilities_of, random_table

RAW = jax.random.split(jax.random.PRNGKey(42), 5)

#: every kind of random value the package's samplers make, and the shapes that JAX splits
#: into counters differently (scalar, odd sizes, two axes)
DRAWS = {
    "split": lambda key: jax.random.split(key),
    "split into 3": lambda key: jax.random.split(key, 3),
    "split into (2, 3)": lambda key: jax.random.split(key, (2, 3)),
    "fold_in": lambda key: jax.random.fold_in(key, 7),
    "uniform scalar": lambda key: jax.random.uniform(key),
    "uniform (3, 5)": lambda key: jax.random.uniform(key, (3, 5)),
    "normal": lambda key: jax.random.normal(key, (5,)),
    "gumbel": lambda key: jax.random.gumbel(key, (3,)),
    "categorical": lambda key: jax.random.categorical(
        key, jnp.log(jnp.array([0.2, 0.3, 0.5])), shape=(7,)
    ),
    "bernoulli": lambda key: jax.random.bernoulli(key, 0.3, (7,)),
    "randint": lambda key: jax.random.randint(key, (5,), 0, 100),
    "permutation": lambda key: jax.random.permutation(key, 9),
    "choice without replacement": lambda key: jax.random.choice(key, 10, (3,), replace=False),
    "8-bit": lambda key: jax.random.bits(key, (5,), jnp.uint8),
    "16-bit": lambda key: jax.random.bits(key, (5,), jnp.uint16),
    "32-bit": lambda key: jax.random.bits(key, (5,)),
}


def as_bits(values) -> np.ndarray:
    if jax.dtypes.issubdtype(values.dtype, jax.dtypes.prng_key):
        values = jax.random.key_data(values)
    return np.asarray(values)


def draws_agree(draw) -> bool:
    """The draw under jit and vmap, from the raw keys and from the engine's keys."""
    typed = engine_keys(RAW)
    program = jax.jit(jax.vmap(draw))
    return np.array_equal(as_bits(program(RAW)), as_bits(program(typed)))


def test_engine_keys_are_typed_keys_of_the_straight_hash():
    typed = engine_keys(RAW)
    assert jax.random.key_impl(typed) == STRAIGHT_THREEFRY
    np.testing.assert_array_equal(jax.random.key_data(typed), RAW)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_every_draw_gives_the_bits_of_jax_threefry(name):
    assert draws_agree(DRAWS[name])


def hash_agrees() -> bool:
    """``threefry2x32`` (run eagerly: no compiled program is reused) against JAX's hash."""
    counts = jnp.arange(8, dtype=jnp.uint32)
    for key in RAW:
        ours = jnp.concatenate(
            engine_keys_module.threefry2x32(key[0], key[1], counts[:4], counts[4:])
        )
        if not np.array_equal(np.asarray(ours), np.asarray(threefry_2x32(key, counts))):
            return False
    return True


def test_the_hash_is_jax_threefry():
    assert hash_agrees()


def test_a_wrong_rotation_is_caught(monkeypatch):
    monkeypatch.setattr(engine_keys_module, "_ROTATIONS", ((13, 15, 26, 6), (17, 29, 16, 23)))
    assert not hash_agrees()


def test_typed_threefry_keys_are_converted_too():
    typed = engine_keys(jax.random.split(jax.random.key(42), 5))
    np.testing.assert_array_equal(jax.random.key_data(typed), RAW)
    assert jax.random.key_impl(typed) == STRAIGHT_THREEFRY


def test_other_keys_are_used_as_given():
    rbg = jax.random.split(jax.random.key(0, impl="rbg"), 3)
    assert str(jax.random.key_impl(engine_keys(rbg))) == "rbg"
    np.testing.assert_array_equal(jax.random.key_data(engine_keys(rbg)), jax.random.key_data(rbg))
    with jax.threefry_partitionable(False):
        used = engine_keys(RAW)
    assert used.dtype == jnp.uint32
    np.testing.assert_array_equal(used, RAW)


def test_a_single_key_is_refused():
    with pytest.raises(ValueError, match=r"batch of PRNG keys of shape \[D, 2\], got \(2,\)"):
        engine_keys(jax.random.PRNGKey(0))


#: a random joint on [2]^3 whose law the runs with keys used as given must draw
TABLE = random_table(7, n=3, q=2)
GIVEN_KEYS = {
    "non-partitionable threefry": lambda num: jax.random.split(jax.random.PRNGKey(3), num),
    "rbg": lambda num: jax.random.split(jax.random.key(3, impl="rbg"), num),
}


def draws_with_keys_as_given(kind: str, num_draws: int) -> np.ndarray:
    """The codes of ``num_draws`` engine draws of :data:`TABLE` with keys of ``kind``, in calls
    of 500 keys to one compilation (:func:`~tests.engine.programs.draws_in_calls`), with more
    slots than draws in a call (the padding rows copy a key's raw data)."""
    process = AnyOrderProcess(TABLE, 3, 2)
    with jax.threefry_partitionable(kind == "rbg"):
        keys = GIVEN_KEYS[kind](num_draws)
        assert jax.random.key_impl(engine_keys(keys)) != STRAIGHT_THREEFRY  # used as given
        draw = jax.jit(lambda keys: run(process, keys, capacity=Capacity(num_slots=512)))
        values = draws_in_calls(draw, keys, 500).value
    return encode_configurations(values, 2)


@pytest.mark.parametrize("kind", sorted(GIVEN_KEYS))
def test_a_run_with_keys_used_as_given_draws_the_law(kind):
    """Keys the engine uses as given (the non-partitionable threefry's raw ``[D, 2]``, typed
    ``rbg`` keys) draw the same law, though not the reference's bits: the chi-square over the
    8 cells of :data:`TABLE` (7 after pooling: the cell of probability 4.8e-5 joins the next
    smallest), 10 000 draws, p > 1e-4, catches an error of 0.03 in a cell of probability 0.2
    at power 0.99 (``power_draws(0.03, 0.2, num_cells=7)``: 9 212 draws)."""
    codes = draws_with_keys_as_given(kind, 10_000)
    assert_gof(codes, probabilities_of(TABLE.log_probs), catches=(0.03, 0.2), label=kind)


@pytest.mark.parametrize("kind", sorted(GIVEN_KEYS))
def test_a_wrong_sampler_with_keys_used_as_given_is_caught(monkeypatch, kind):
    """The chi-square of :func:`test_a_run_with_keys_used_as_given_draws_the_law` rejects the
    default root with its block verification keeping every drafted site, with each kind of
    keys: 500 draws (one call) in a compilation of their own (measured: non-partitionable
    threefry, statistic 307 on 6 dof, p = 2.5e-63; ``rbg``, statistic 447 on 6 dof,
    p = 2.3e-93; the right sampler on the same keys: p = 0.67 and 0.63)."""
    break_block_verification(monkeypatch)
    codes = draws_with_keys_as_given(kind, 500)
    result = chisquare_gof(codes, probabilities_of(TABLE.log_probs))
    assert result.p_value <= 1e-4, result
