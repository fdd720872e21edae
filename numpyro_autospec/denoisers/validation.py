r"""Checks that a denoiser and a time grid meet the contract of the diffusion process.

Three layers, from cheapest to most thorough:

- :func:`check_denoiser_signature` traces the denoiser abstractly (:func:`jax.eval_shape`, no
  computation) and checks that it maps a float32 scalar ``t`` and a float32 ``(dim,)`` vector
  ``y`` to a float32 ``(dim,)`` vector.
- :func:`denoiser_defect` is a pure :mod:`jax.numpy` function that can run inside a compiled
  sampler: it turns one denoiser evaluation into an int32 code (:data:`DEFECT_NONE`,
  :data:`DEFECT_NAN`, :data:`DEFECT_INFINITE`, :data:`DEFECT_TIME`). The host then calls
  :func:`raise_if_defect` on the code to raise a readable :class:`DenoiserError`.
- :func:`validate_denoiser` runs both eagerly at probe points and, when given, checks the time
  grid :math:`0 = t_0 < t_1 < \dots < t_N` with :func:`check_time_grid`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

__all__ = [
    "DEFECT_INFINITE",
    "DEFECT_NAN",
    "DEFECT_NONE",
    "DEFECT_TIME",
    "DenoiserError",
    "check_denoiser_signature",
    "check_time_grid",
    "denoiser_defect",
    "raise_if_defect",
    "validate_denoiser",
]

DEFECT_NONE = 0
"""Code of a denoiser evaluation without defect."""
DEFECT_NAN = 1
"""Code of a denoiser output containing NaN."""
DEFECT_INFINITE = 2
"""Code of a denoiser output containing +inf or -inf (and no NaN)."""
DEFECT_TIME = 3
"""Code of a denoiser called at a negative or non-finite time ``t``."""

_DEFAULT_PROBE_TIMES = (0.0, 1e-3, 1e-1, 1.0, 10.0, 1e3)
_MAX_PROBE_TIMES = 16


class DenoiserError(ValueError):
    """A denoiser or a time grid violates the contract of :class:`~.base.Denoiser`."""


def check_denoiser_signature(
    denoiser: Callable[[Array, Array], Array], dim: int, *, name: str = "denoiser"
) -> None:
    """Check abstractly that ``denoiser(t, y)`` maps float32 ``()`` and ``(dim,)`` to ``(dim,)``.

    The check traces the denoiser with :func:`jax.eval_shape`: no computation runs.

    :param denoiser: the callable to check.
    :param dim: the dimension :math:`d` of the state space.
    :param name: how error messages refer to the denoiser.
    :raises DenoiserError: if ``dim`` is not a positive integer, if ``denoiser.dim`` exists and
        differs from ``dim``, if tracing fails, or if the output is not a single float32 array
        of shape ``(dim,)``.
    """
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise DenoiserError(f"dim must be a positive integer, got {dim!r}")
    if not callable(denoiser):
        raise DenoiserError(f"{name} must be callable, got {type(denoiser).__name__}")
    declared_dim = getattr(denoiser, "dim", None)
    if declared_dim is not None and declared_dim != dim:
        raise DenoiserError(f"{name}.dim is {declared_dim} but the process expects dim={dim}")
    time_spec = jax.ShapeDtypeStruct((), jnp.float32)
    state_spec = jax.ShapeDtypeStruct((dim,), jnp.float32)
    try:
        output = jax.eval_shape(denoiser, time_spec, state_spec)
    except Exception as error:
        raise DenoiserError(
            f"{name} could not be traced with t: float32[] and y: float32[{dim}]: "
            f"{type(error).__name__}: {error}"
        ) from error
    if not isinstance(output, jax.ShapeDtypeStruct):
        raise DenoiserError(
            f"{name} must return a single array of shape ({dim},), "
            f"got {jax.tree_util.tree_structure(output)}"
        )
    if output.shape != (dim,) or output.dtype != jnp.float32:
        raise DenoiserError(
            f"{name} must return float32[{dim}] (shape ({dim},)), "
            f"got {output.dtype}{list(output.shape)} (shape {output.shape})"
        )


def denoiser_defect(output: ArrayLike, t: ArrayLike) -> Array:
    """Classify one denoiser evaluation as an int32 code; pure :mod:`jax.numpy`, traceable.

    The code is :data:`DEFECT_TIME` if ``t`` is negative or not finite (checked first: such a
    time usually also causes the other defects), else :data:`DEFECT_NAN` if ``output`` contains
    a NaN, else :data:`DEFECT_INFINITE` if it contains an infinity, else :data:`DEFECT_NONE`.
    All elements are reduced to one scalar code; use :func:`jax.vmap` for one code per batch
    member.

    :param output: the denoiser output, any shape.
    :param t: the time at which the denoiser was called, any shape.
    :return: int32 scalar code.

    **Example**

    >>> import jax.numpy as jnp
    >>> int(denoiser_defect(jnp.array([0.0, jnp.nan]), 1.0)) == DEFECT_NAN
    True
    >>> int(denoiser_defect(jnp.zeros(2), -1.0)) == DEFECT_TIME
    True
    """
    output = jnp.asarray(output)
    t = jnp.asarray(t)
    time_defect = jnp.any(~jnp.isfinite(t) | (t < 0))
    nan_defect = jnp.any(jnp.isnan(output))
    infinite_defect = jnp.any(jnp.isinf(output))
    code = jnp.where(
        time_defect,
        DEFECT_TIME,
        jnp.where(nan_defect, DEFECT_NAN, jnp.where(infinite_defect, DEFECT_INFINITE, DEFECT_NONE)),
    )
    return code.astype(jnp.int32)


def _defect_message(code: int, name: str, t: object) -> str:
    at_time = "" if t is None else f" at t={t}"
    if code == DEFECT_NAN:
        return f"{name} returned NaN{at_time}"
    if code == DEFECT_INFINITE:
        return f"{name} returned an infinite value{at_time}"
    if code == DEFECT_TIME:
        time_text = "" if t is None else f" with t={t}"
        return f"{name} was called{time_text}: t must be finite and non-negative"
    raise ValueError(f"unknown denoiser defect code {code}")


def raise_if_defect(code: ArrayLike, *, name: str = "denoiser", t: ArrayLike | None = None) -> None:
    """Host side: raise :class:`DenoiserError` if ``code`` (from :func:`denoiser_defect`) is set.

    Blocks on ``code``. A batch of codes is accepted; the first non-zero one is reported, with
    its batch index, and with the matching entry of ``t`` when ``t`` has the same shape.

    :param code: int32 code or array of codes.
    :param name: how the message refers to the denoiser.
    :param t: the time (or times) of the evaluation, quoted in the message.
    :raises DenoiserError: if any code is not :data:`DEFECT_NONE`.
    :raises ValueError: if a code is not one of the defined constants.
    """
    codes = np.asarray(code)
    defective = np.flatnonzero(codes.reshape(-1) != DEFECT_NONE)
    if defective.size == 0:
        return
    flat_index = int(defective[0])
    first_code = int(codes.reshape(-1)[flat_index])
    time_value = None
    if t is not None:
        times = np.asarray(t)
        if times.ndim == 0:
            time_value = times.item()
        elif times.shape == codes.shape:
            time_value = times.reshape(-1)[flat_index].item()
    message = _defect_message(first_code, name, time_value)
    if codes.ndim > 0:
        batch_index = np.unravel_index(flat_index, codes.shape)
        index_text = batch_index[0] if len(batch_index) == 1 else batch_index
        message += f" (batch index {index_text})"
    raise DenoiserError(message)


def check_time_grid(times: ArrayLike, *, name: str = "times") -> np.ndarray:
    r"""Check a time grid :math:`0 = t_0 < t_1 < \dots < t_N` and return it as float32 numpy.

    The grid must be concrete (not a JAX tracer), one-dimensional with at least two entries,
    of a real (integer or floating) dtype, finite, start at exactly 0, and be strictly
    increasing *after* conversion to float32 (two times that float32 cannot tell apart would
    give a zero step).

    :param times: the grid.
    :param name: how error messages refer to the grid.
    :return: the grid as a float32 :class:`numpy.ndarray`.
    :raises DenoiserError: naming the first offending index and value.

    **Example**

    >>> check_time_grid([0.0, 0.5, 1.0]).tolist()
    [0.0, 0.5, 1.0]
    """
    if isinstance(times, jax.core.Tracer):
        raise DenoiserError(f"{name} must be a concrete array, not a traced value")
    grid = np.asarray(times)
    if grid.dtype.kind not in "iuf":
        raise DenoiserError(f"{name} must be a real (float) array, got dtype {grid.dtype}")
    if grid.ndim != 1:
        raise DenoiserError(f"{name} must be one-dimensional, got shape {grid.shape}")
    if grid.shape[0] < 2:
        raise DenoiserError(
            f"{name} must hold at least two times (0 and an end time), got {grid.shape[0]}"
        )
    non_finite = np.flatnonzero(~np.isfinite(grid))
    if non_finite.size > 0:
        index = int(non_finite[0])
        raise DenoiserError(f"{name}[{index}] = {grid[index]} is not finite")
    if grid[0] != 0:
        raise DenoiserError(f"{name} must start at 0, got {name}[0] = {grid[0]}")
    grid32 = grid.astype(np.float32)
    for label, values in (("", grid), (" in float32", grid32)):
        not_increasing = np.flatnonzero(np.diff(values) <= 0)
        if not_increasing.size > 0:
            index = int(not_increasing[0]) + 1
            raise DenoiserError(
                f"{name} must be strictly increasing{label}: "
                f"{name}[{index}] = {values[index]} <= {name}[{index - 1}] = {values[index - 1]}"
            )
    return grid32


def _probe_times(grid: np.ndarray | None) -> np.ndarray:
    if grid is None:
        return np.asarray(_DEFAULT_PROBE_TIMES, dtype=np.float32)
    indices = np.unique(np.linspace(0, grid.shape[0] - 1, _MAX_PROBE_TIMES).round().astype(int))
    return grid[indices]


def validate_denoiser(
    denoiser: Callable[[Array, Array], Array],
    dim: int,
    times: ArrayLike | None = None,
    *,
    name: str = "denoiser",
    key: Array | None = None,
) -> None:
    r"""Eagerly check a denoiser (and optionally a time grid) against the contract.

    Steps: :func:`check_denoiser_signature`; :func:`check_time_grid` on ``times`` if given;
    then one evaluation of ``jax.jit(jax.vmap(denoiser))`` on a batch of probe points, each
    output checked with :func:`denoiser_defect`. The probe times are up to 16 points of the
    grid (evenly spaced in index, always including both ends), or
    :math:`\{0, 10^{-3}, 10^{-1}, 1, 10, 10^3\}` without a grid. The probe observations are
    typical for a target with unit-scale coordinates, :math:`y = t z_1 + \sqrt{t} z_2` with
    :math:`z_1, z_2 \sim \mathcal{N}(0, I)` (so :math:`y = 0` at :math:`t = 0`).

    :param denoiser: the callable to check.
    :param dim: the dimension :math:`d`.
    :param times: optional time grid :math:`0 = t_0 < \dots < t_N`.
    :param name: how error messages refer to the denoiser.
    :param key: PRNG key for the probe observations; defaults to ``jax.random.key(0)``.
    :raises DenoiserError: on the first violation found.

    **Example**

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> validate_denoiser(PointCloudDenoiser(jnp.eye(2)), 2, times=[0.0, 0.5, 1.0])
    >>> validate_denoiser(lambda t, y: y / t, 2)
    Traceback (most recent call last):
        ...
    numpyro_autospec.denoisers.validation.DenoiserError: denoiser returned NaN at t=0.0 (batch index 0)
    """  # noqa: E501
    check_denoiser_signature(denoiser, dim, name=name)
    grid = None if times is None else check_time_grid(times)
    probe_times = _probe_times(grid)
    if key is None:
        key = jax.random.key(0)
    # Host-side probes, seeded from the key: no random-number program to compile.
    generator = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
    num_probes = probe_times.shape[0]
    scale_draws, noise_draws = generator.standard_normal((2, num_probes, dim))
    probe_states = (
        probe_times[:, None] * scale_draws + np.sqrt(probe_times)[:, None] * noise_draws
    ).astype(np.float32)

    def evaluate_probes(times_batch: Array, states_batch: Array) -> Array:
        outputs = jax.vmap(denoiser)(times_batch, states_batch)
        return jax.vmap(denoiser_defect)(outputs, times_batch)

    try:
        codes = jax.jit(evaluate_probes)(probe_times, probe_states)
    except Exception as error:
        raise DenoiserError(
            f"{name} failed under jax.jit(jax.vmap(...)) on a batch of {num_probes} probe "
            f"points: {type(error).__name__}: {error}"
        ) from error
    raise_if_defect(codes, name=name, t=probe_times)
