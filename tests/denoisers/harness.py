"""The harness of the denoiser tests: exact draws of Y with independent standard normal noise,
one compiled batch of denoiser calls, the z-tolerance of a sample mean (the Monte Carlo
tests), and random eager calls (the jit and vmap tests).

Nothing here is a test; ``tests/denoisers/test_*.py`` import it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

#: a sample mean passes when it is within this many estimated standard errors of its exact
#: value, per coordinate (two-sided p ~ 6e-7 per coordinate under H0)
Z_TOLERANCE = 5.0
#: draws of the shared Monte Carlo sample of a denoiser
NUM_DRAWS = 20_000

#: one compiled program per denoiser shape and batch size, shared by the tests
denoise_batch = jax.jit(jax.vmap(lambda model, t, y: model(t, y), in_axes=(None, None, 0)))


def targets_and_noise(denoiser, seed: int) -> tuple[jax.Array, jax.Array]:
    """``NUM_DRAWS`` exact draws of Y (``denoiser.sample``) and independent standard normal
    noise of their shape, from the two halves of ``jax.random.split(jax.random.key(seed))``."""
    sample_key, noise_key = jax.random.split(jax.random.key(seed))
    targets = denoiser.sample(sample_key, NUM_DRAWS)
    return targets, jax.random.normal(noise_key, targets.shape)


def observations_and_residuals(denoiser, draws, t: float) -> tuple[np.ndarray, np.ndarray]:
    """The observations ``y = t Y + sqrt(t) g`` of ``draws = (targets, noise)``
    (:func:`targets_and_noise`) and the residuals ``Y - f(t, y)``, as numpy arrays."""
    targets, noise = draws
    observations = t * targets + np.sqrt(t) * noise
    residuals = targets - denoise_batch(denoiser, t, observations)
    return np.asarray(observations), np.asarray(residuals)


def assert_means_within(values, expected) -> None:
    """The mean of ``values`` over its first axis is within ``Z_TOLERANCE`` estimated standard
    errors (``std / sqrt(len(values))``) of ``expected``, entry by entry."""
    values = np.asarray(values)
    standard_errors = values.std(axis=0) / np.sqrt(values.shape[0])
    assert np.all(np.abs(values.mean(axis=0) - expected) < Z_TOLERANCE * standard_errors)


def eager_calls(denoiser, seed: int) -> tuple[jax.Array, jax.Array, np.ndarray]:
    """8 random times in [0, 5) and observations (float32, ``np.random.default_rng(seed)``),
    and the denoiser's outputs called on each pair eagerly, one by one."""
    rng = np.random.default_rng(seed)
    times = jnp.asarray(rng.uniform(0.0, 5.0, size=8), dtype=jnp.float32)
    observations = jnp.asarray(rng.normal(size=(8, denoiser.dim)), dtype=jnp.float32)
    eager = np.stack([denoiser(t, y) for t, y in zip(times, observations, strict=True)])
    return times, observations, eager
