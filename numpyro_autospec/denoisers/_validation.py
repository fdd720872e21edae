r"""Checks that a denoiser and a time grid meet the contract of the diffusion process.

Three layers, from cheapest to most thorough:

- :func:`check_denoiser_signature` traces the denoiser abstractly (:func:`jax.eval_shape`, no
  computation) and checks that it maps a float32 scalar ``t`` and a float32 ``(dim,)`` vector
  ``y`` to a float32 ``(dim,)`` vector.
- :func:`denoiser_defect` is a pure :mod:`jax.numpy` function that can run inside a compiled
  sampler: it turns one denoiser evaluation into an int32 code (:data:`DEFECT_OK`,
  :data:`DEFECT_NAN`, :data:`DEFECT_INFINITE`, :data:`DEFECT_TIME`: the codes of
  :mod:`numpyro_autospec.errors`, shared with the any-order oracles). The host then calls
  :func:`~numpyro_autospec.errors.raise_if_defect` on the code (``error=DenoiserError``) to
  raise a readable :class:`DenoiserError`.
- :func:`validate_denoiser` runs both eagerly at probe points and, when given, checks the time
  grid :math:`0 = t_0 < t_1 < \dots < t_N` with :func:`check_time_grid`.
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
    """Check abstractly that ``denoiser(t, y)`` maps float32 ``()`` and ``(dim,)`` to ``(dim,)``.

    The check traces the denoiser with :func:`jax.eval_shape`: no computation runs.

    :param denoiser: the callable to check.
    :param dim: the dimension :math:`d` of the state space.
    :param name: how error messages refer to the denoiser.
    :raises DenoiserError: if ``dim`` is not a positive integer, if ``denoiser.dim`` exists and
        differs from ``dim``, if tracing fails, or if the output is not a single float32 array
        of shape ``(dim,)``.

    >>> check_denoiser_signature(lambda t, y: (1.0 - t) * y, dim=3)  # passes: returns None
    >>> check_denoiser_signature(lambda t, y: y[:2], dim=3, name="half")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.DenoiserError: half must return float32[3] \
(shape (3,)), got float32[2] (shape (2,))
    """
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
    """Classify one denoiser evaluation as an int32 code; pure :mod:`jax.numpy`, traceable.

    The code is :data:`DEFECT_TIME` if ``t`` is negative or not finite (checked first: such a
    time usually also causes the other defects), else :data:`DEFECT_NAN` if ``output`` contains
    a NaN, else :data:`DEFECT_INFINITE` if it contains an infinity, else :data:`DEFECT_OK`.
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
        jnp.where(nan_defect, DEFECT_NAN, jnp.where(infinite_defect, DEFECT_INFINITE, DEFECT_OK)),
    )
    return code.astype(jnp.int32)


def check_query_time(t: ArrayLike, *, owner: str) -> Array:
    """One denoiser query's time ``t`` as a float32 scalar.

    :raises DenoiserError: naming ``owner`` and the shape, for a ``t`` that is not a scalar
        (a batch: the denoisers are written for one query and batched with ``jax.vmap``).

    >>> check_query_time(0.5, owner="MyDenoiser").dtype
    dtype('float32')
    >>> check_query_time([0.5, 1.0], owner="MyDenoiser")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.DenoiserError: MyDenoiser: t must be a scalar, \
got shape (2,); use jax.vmap for batches
    """
    t = jnp.asarray(t, dtype=jnp.float32)
    if t.shape != ():
        raise DenoiserError(
            f"{owner}: t must be a scalar, got shape {t.shape}; use jax.vmap for batches"
        )
    return t


def check_query_state(y: ArrayLike, dim: int, *, owner: str) -> Array:
    """One denoiser query's state ``y`` as a float32 vector of shape ``(dim,)``.

    :raises DenoiserError: naming ``owner``, the expected and the given shape.

    >>> check_query_state([0.0, 1.0], 2, owner="MyDenoiser").shape
    (2,)
    """
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

    Only the grid's *length* is static.  Its shape and dtype are always checked: one-dimensional
    with at least two entries, of a real (integer or floating) dtype.  A concrete grid is also
    checked on the host: finite, starting at exactly 0, strictly increasing *after* conversion
    to float32 (two times that float32 cannot tell apart would give a zero step); it is
    returned as float32 numpy.  A traced grid (a model argument under ``jit``, a value computed
    in the model) is returned as a float32 JAX array without value checks: a bad grid then
    shows up as NaN or infinite answers, which the engine's answer validation reports.

    :param times: the grid.
    :param name: how error messages refer to the grid.
    :param site: the site the grid belongs to, named in error messages when given.
    :return: the grid, float32 (numpy when concrete).
    :raises TimeGridError: naming the first offending index and value.

    **Example**

    >>> check_time_grid([0.0, 0.5, 1.0]).tolist()
    [0.0, 0.5, 1.0]
    >>> check_time_grid([0.0, 1.0, 1.0], site="y")
    Traceback (most recent call last):
        ...
    numpyro_autospec.errors.TimeGridError: site 'y': times must be strictly ...
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
    """The defect codes of the denoiser's outputs at the probe points: one compiled call
    (evaluated even inside ``ensure_compile_time_eval``, its body staged), compiled once per
    denoiser structure and shapes
    (:func:`~numpyro_autospec._core.parameters.jit_over_parameters`)."""
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
    numpyro_autospec.errors.DenoiserError: denoiser returned NaN at t=0.0 (batch index 0)
    """  # noqa: E501
    check_denoiser_signature(denoiser, dim, name=name)
    grid = None if times is None else check_time_grid(times)
    if grid is not None and not isinstance(grid, np.ndarray):
        grid = None  # a traced grid: probe at the default times
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

    try:
        codes = _evaluate_probes(denoiser, probe_times, probe_states)
    except Exception as error:
        raise DenoiserError(
            f"{name} failed under jax.jit(jax.vmap(...)) on a batch of {num_probes} probe "
            f"points: {type(error).__name__}: {first_line(error)}"
        ) from error
    raise_if_defect(codes, name=name, t=probe_times, error=DenoiserError)
