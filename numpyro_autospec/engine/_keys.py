"""The engine's keys: :data:`STRAIGHT_THREEFRY` computes **the same bits** as JAX's threefry
with the hash as ``jax.numpy`` operations, which XLA fuses (on the CPU JAX's rolled loop is
compiled as a function per call site, a quarter of the engine's LLVM IR)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.extend.random import define_prng_impl, threefry_prng_impl

from numpyro_autospec.errors import InputError

__all__ = ["STRAIGHT_THREEFRY", "threefry2x32", "engine_keys"]

#: the rotations of the two alternating groups of four rounds
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: the key schedule's parity constant
_PARITY = np.uint32(0x1BD11BDA)


def threefry2x32(key1: Array, key2: Array, count1: Array, count2: Array) -> tuple[Array, Array]:
    """The Threefry-2x32 hash (Salmon et al., SC 2011; 20 rounds) of ``(count1, count2)``
    under the key ``(key1, key2)``, as ``jax.extend.random.threefry_2x32`` computes it."""
    keys = (key1, key2, key1 ^ key2 ^ _PARITY)
    x1, x2 = count1 + keys[0], count2 + keys[1]
    for group in range(5):
        for rotation in _ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = (x2 << np.uint32(rotation)) | (x2 >> np.uint32(32 - rotation))
            x2 = x1 ^ x2
        x1 = x1 + keys[(group + 1) % 3]
        x2 = x2 + keys[(group + 2) % 3] + np.uint32(group + 1)
    return x1, x2


def _counters(shape) -> tuple[Array, Array]:
    """JAX's counters: the high and low words of each element's row-major index."""
    size = math.prod(shape)
    if size >= 2**32:
        raise InputError(f"at most 2**32 - 1 random values at once, got shape {shape}")
    low = jnp.arange(size, dtype=jnp.uint32).reshape(shape)
    return jnp.zeros(shape, jnp.uint32), low


def _split(key: Array, shape) -> Array:
    high, low = _counters(shape)
    bits1, bits2 = threefry2x32(key[0], key[1], high, low)
    return jnp.stack([bits1, bits2], axis=-1)


def _fold_in(key: Array, data: Array) -> Array:
    data = jnp.asarray(data, jnp.uint32)
    bits1, bits2 = threefry2x32(key[0], key[1], jnp.zeros_like(data), data)
    return jnp.stack([bits1, bits2])


def _random_bits(key: Array, bit_width: int, shape) -> Array:
    high, low = _counters(shape)
    bits1, bits2 = threefry2x32(key[0], key[1], high, low)
    if bit_width == 64:
        return (bits1.astype(jnp.uint64) << np.uint64(32)) | bits2.astype(jnp.uint64)
    dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}[bit_width]
    return (bits1 ^ bits2).astype(dtype)


#: JAX's threefry2x32 keys with the hash as straight-line ``jax.numpy`` code (the same bits)
STRAIGHT_THREEFRY = define_prng_impl(
    key_shape=(2,),
    seed=threefry_prng_impl.seed,
    split=_split,
    random_bits=_random_bits,
    fold_in=_fold_in,
    name="threefry2x32_straight",
    tag="fst",
)


def engine_keys(keys) -> Array:
    """A batch of keys (raw ``uint32[D, 2]`` or typed ``[D]``) as :data:`STRAIGHT_THREEFRY`
    keys when they are JAX's partitionable threefry keys (the same bits), else as given.

    :raises InputError: the keys are not a batch (their raw data is not two-dimensional).
    """
    given = jnp.asarray(keys)
    if jax.dtypes.issubdtype(given.dtype, jax.dtypes.prng_key):
        threefry = str(jax.random.key_impl(given)) == "threefry2x32"
        data = jax.random.key_data(given)
    else:
        threefry = jax.config.jax_default_prng_impl == "threefry2x32"
        data = given
    if data.ndim != 2:
        raise InputError(f"keys must be a batch of PRNG keys of shape [D, 2], got {data.shape}")
    if not (threefry and jax.config.jax_threefry_partitionable and data.shape[-1] == 2):
        return given
    return jax.random.wrap_key_data(data, impl=STRAIGHT_THREEFRY)
