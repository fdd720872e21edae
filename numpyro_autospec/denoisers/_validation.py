r"""Checks that a denoiser and a time grid meet the contract of the diffusion process.

:func:`check_denoiser_signature` traces the denoiser abstractly; :func:`denoiser_defect` turns
one evaluation into an int32 defect code of :mod:`numpyro_autospec.errors` inside a compiled
sampler (the host raises with ``raise_if_defect(..., error=DenoiserError)``);
:func:`validate_denoiser` runs both eagerly at probe points, and :func:`check_time_grid` checks
a grid :math:`0 = t_0 < t_1 < \dots < t_N`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.parameters import abstract_output, jit_over_parameters, staged_constants
from numpyro_autospec.errors import (
    DEFECT_INFINITE,
    DEFECT_NAN,
    DEFECT_OK,
    DEFECT_TIME,
    DenoiserError,
    TimeGridError,
    first_line,
    positive_integer,
    raise_if_defect,
)

__all__ = [
    "check_denoiser_signature",
    "check_query_state",
    "check_query_time",
    "check_time_grid",
    "denoiser_defect",
    "validate_denoiser",
]

_DEFAULT_PROBE_TIMES = (0.0, 1e-3, 1e-1, 1.0, 10.0, 1e3)
_MAX_PROBE_TIMES = 16


def check_denoiser_signature(
    denoiser: Callable[[Array, Array], Array], dim: int, *, name: str = "denoiser"
) -> None:
    """Check with :func:`jax.eval_shape` (no computation) that ``denoiser(t, y)`` maps float32
    ``()`` and ``(dim,)`` to float32 ``(dim,)``; ``DenoiserError`` naming ``name`` otherwise."""
    positive_integer(dim, "dim", DenoiserError)
    if not callable(denoiser):
        raise DenoiserError(f"{name} must be callable, got {type(denoiser).__name__}")
    declared_dim = getattr(denoiser, "dim", None)
    if declared_dim is not None and declared_dim != dim:
        raise DenoiserError(f"{name}.dim is {declared_dim} but the process expects dim={dim}")
    time_spec = jax.ShapeDtypeStruct((), jnp.float32)
    state_spec = jax.ShapeDtypeStruct((dim,), jnp.float32)
    output = abstract_output(
        lambda: jax.eval_shape(denoiser, time_spec, state_spec),
        DenoiserError,
        f"{name} could not be traced with t: float32[] and y: float32[{dim}]",
        f"{name} must return one array of shape ({dim},)",
    )
    if output.shape != (dim,) or output.dtype != jnp.float32:
        raise DenoiserError(
            f"{name} must return float32[{dim}] (shape ({dim},)), "
            f"got {output.dtype}{list(output.shape)} (shape {output.shape})"
        )


def denoiser_defect(output: ArrayLike, t: ArrayLike) -> Array:
    """The int32 scalar code of one evaluation (traceable): ``DEFECT_TIME`` if ``t`` is negative
    or not finite, else ``DEFECT_NAN``, ``DEFECT_INFINITE`` or ``DEFECT_OK`` for ``output``."""
    output = jnp.asarray(output)
    t = jnp.asarray(t)
    time_defect = jnp.any(~jnp.isfinite(t) | (t < 0))
    nan_defect = jnp.any(jnp.isnan(output))
    infinite_defect = jnp.any(jnp.isinf(output))
    code = jnp.where(
        time_defect,
        DEFECT_TIME,
        jnp.where(nan_defect, DEFECT_NAN, jnp.where(infinite_defect, DEFECT_INFINITE, DEFECT_OK)),
    )
    return code.astype(jnp.int32)


def check_query_time(t: ArrayLike, *, owner: str) -> Array:
    """One query's time ``t`` as a float32 scalar (``DenoiserError`` naming ``owner``)."""
    t = jnp.asarray(t, dtype=jnp.float32)
    if t.shape != ():
        raise DenoiserError(
            f"{owner}: t must be a scalar, got shape {t.shape}; use jax.vmap for batches"
        )
    return t


def check_query_state(y: ArrayLike, dim: int, *, owner: str) -> Array:
    """One query's state ``y`` as float32 ``(dim,)`` (``DenoiserError`` naming ``owner``)."""
    y = jnp.asarray(y, dtype=jnp.float32)
    if y.shape != (dim,):
        raise DenoiserError(
            f"{owner}: y must have shape ({dim},), got {y.shape}; use jax.vmap for batches"
        )
    return y


def check_time_grid(
    times: ArrayLike, *, name: str = "times", site: str | None = None
) -> np.ndarray | Array:
    r"""Check a time grid :math:`0 = t_0 < t_1 < \dots < t_N` and return it as float32.

    Shape and real dtype are always checked; a concrete grid is also checked to be finite,
    start at 0 and increase strictly in float32, and returned as float32 numpy.  A traced grid
    is returned as a float32 JAX array without value checks.  ``TimeGridError`` names the
    first offending index and value (and ``site`` when given).
    """
    prefix = "" if site is None else f"site {site!r}: "
    traced = isinstance(times, jax.core.Tracer)
    dtype = jnp.result_type(times) if traced else np.asarray(times).dtype
    if np.dtype(dtype).kind not in "iuf":
        raise TimeGridError(f"{prefix}{name} must be a real (float) array, got dtype {dtype}")
    shape = jnp.shape(times) if traced else np.shape(times)
    if len(shape) != 1:
        raise TimeGridError(f"{prefix}{name} must be one-dimensional, got shape {shape}")
    if shape[0] < 2:
        raise TimeGridError(
            f"{prefix}{name} must hold at least two times (0 and an end time), got {shape[0]}"
        )
    if isinstance(times, jax.core.Tracer):
        return jnp.asarray(times, jnp.float32)
    grid = np.asarray(times)
    non_finite = np.flatnonzero(~np.isfinite(grid))
    if non_finite.size > 0:
        index = int(non_finite[0])
        raise TimeGridError(f"{prefix}{name}[{index}] = {grid[index]} is not finite")
    if grid[0] != 0:
        raise TimeGridError(f"{prefix}{name} must start at 0, got {name}[0] = {grid[0]}")
    grid32 = grid.astype(np.float32)
    for label, values in (("", grid), (" in float32", grid32)):
        not_increasing = np.flatnonzero(np.diff(values) <= 0)
        if not_increasing.size > 0:
            index = int(not_increasing[0]) + 1
            raise TimeGridError(
                f"{prefix}{name} must be strictly increasing{label}: "
                f"{name}[{index}] = {values[index]} <= {name}[{index - 1}] = {values[index - 1]}"
            )
    return grid32


def _probe_times(grid: np.ndarray | None) -> np.ndarray:
    if grid is None:
        return np.asarray(_DEFAULT_PROBE_TIMES, dtype=np.float32)
    indices = np.unique(np.linspace(0, grid.shape[0] - 1, _MAX_PROBE_TIMES).round().astype(int))
    return grid[indices]


@jit_over_parameters
def _evaluate_probes(denoiser, times: Array, states: Array) -> Array:
    """The defect codes of the denoiser's outputs at the probe points, in one compiled call."""
    with staged_constants():
        outputs = jax.vmap(denoiser)(times, states)
        return jax.vmap(denoiser_defect)(outputs, times)


def validate_denoiser(
    denoiser: Callable[[Array, Array], Array],
    dim: int,
    times: ArrayLike | None = None,
    *,
    name: str = "denoiser",
    key: Array | None = None,
) -> None:
    r"""Eagerly check a denoiser (and optionally a time grid) against the contract.

    Checks the signature and the grid, then evaluates ``jax.jit(jax.vmap(denoiser))`` once at
    probe points for NaN or infinite outputs: up to 16 times of the grid (both ends included),
    or :math:`\{0, 10^{-3}, 10^{-1}, 1, 10, 10^3\}` without one, and :math:`y = t z_1 + \sqrt{t}
    z_2`, :math:`z_1, z_2 \sim \mathcal{N}(0, I)`.

    :param denoiser: the callable to check.
    :param dim: the dimension :math:`d`.
    :param times: optional time grid :math:`0 = t_0 < \dots < t_N`.
    :param name: how error messages refer to the denoiser.
    :param key: PRNG key for the probe observations; defaults to ``jax.random.key(0)``.
    :raises DenoiserError: on the first violation found.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> validate_denoiser(PointCloudDenoiser(jnp.eye(2)), 2, times=[0.0, 0.5, 1.0])
    >>> validate_denoiser(lambda t, y: y / t, 2)
    Traceback (most recent call last):
        ...
    numpyro_autospec.errors.DenoiserError: denoiser returned NaN at t=0.0 (batch index 0)
    """  # noqa: E501
    check_denoiser_signature(denoiser, dim, name=name)
    grid = None if times is None else check_time_grid(times)
    if grid is not None and not isinstance(grid, np.ndarray):
        grid = None  # a traced grid: probe at the default times
    probe_times = _probe_times(grid)
    if key is None:
        key = jax.random.key(0)
    # host-side probes: no random-number program to compile
    generator = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
    num_probes = probe_times.shape[0]
    scale_draws, noise_draws = generator.standard_normal((2, num_probes, dim))
    probe_states = (
        probe_times[:, None] * scale_draws + np.sqrt(probe_times)[:, None] * noise_draws
    ).astype(np.float32)

    try:
        codes = _evaluate_probes(denoiser, probe_times, probe_states)
    except Exception as error:
        raise DenoiserError(
            f"{name} failed under jax.jit(jax.vmap(...)) on a batch of {num_probes} probe "
            f"points: {type(error).__name__}: {first_line(error)}"
        ) from error
    raise_if_defect(codes, name=name, t=probe_times, error=DenoiserError)
