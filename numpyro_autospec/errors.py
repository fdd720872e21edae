"""The package's exception types: one base class for every error it raises on bad input.

Every error raised because of what a user passed (an oracle, a configuration, an observation, a
time grid, a model) is an :class:`AutospecError`, also a :class:`ValueError`, so ``except
AutospecError`` catches them all, also when a run fails inside its compiled program
(docs/numpyro.md, "Errors inside the compiled program").  Families: :class:`ConfigError`,
:class:`InputError`, :class:`OracleError`, :class:`UnsupportedModelError`.  Misuse of an API
raises Python's :class:`TypeError` (a model that is not callable) or :class:`RuntimeError` (a
kernel's ``sample`` before its ``init``).

Example
-------
>>> from numpyro_autospec import SamplerConfig
>>> try:
...     SamplerConfig(growth=-1.0).validate()
... except AutospecError as error:
...     print(type(error).__name__, isinstance(error, ValueError))
ConfigError True
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

__all__ = [
    "DEFECT_INFINITE",
    "DEFECT_NAN",
    "DEFECT_OK",
    "DEFECT_TIME",
    "DEFECT_UNNORMALIZED",
    "AutospecError",
    "ConfigError",
    "DenoiserError",
    "InputError",
    "OracleError",
    "ShardingError",
    "TimeGridError",
    "UnsupportedModelError",
    "describe_defect",
    "raise_if_defect",
]


class AutospecError(ValueError):
    """Base class of every error raised on bad input; its message names the site, the
    parameter, the shape or the value.

    >>> issubclass(ConfigError, AutospecError), issubclass(InputError, AutospecError)
    (True, True)
    """


class ConfigError(AutospecError):
    """A sampler's knobs (a ``SamplerConfig``, a ``Capacity`` and its mesh, the options of a
    baseline or a training loop) are out of range or inconsistent.

    >>> from numpyro_autospec.config import SamplerConfig
    >>> SamplerConfig(block_size=0).validate()
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.ConfigError: block_size must be >= 1 or None, got 0
    """


class InputError(AutospecError):
    """Data given to a sampler is malformed: observed values or masks, an order, keys, a time
    grid, a site's sizes, training data.

    >>> import numpy as np
    >>> from numpyro_autospec import oracles, processes
    >>> try:
    ...     processes.AnyOrderProcess(oracles.CurieWeissOracle(3, beta=1.0), 3, 2,
    ...         observed_mask=np.ones(2, bool), observed_values=np.zeros(3, int))
    ... except InputError as error:
    ...     print(error)
    site 'x': observed_mask must be a bool array of shape (3,), got bool (2,)
    """


def positive_integer(value: object, label: str, error: type[AutospecError] = InputError) -> int:
    """``value`` as an ``int`` if it is a positive Python or NumPy integer (not a ``bool``, a
    float or a traced value), else raise ``error``: the check of every size and count."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{label} must be a positive integer, got {value!r}")
    return int(value)


# -- defective oracle answers ----------------------------------------------------------------------
# int32 codes of defective answers of any-order oracles and denoisers, computed in the compiled
# sampler and turned into one readable error by raise_if_defect on the host.

DEFECT_OK = 0
"""Code of an answer without defect."""
DEFECT_NAN = 1
"""Code of an answer with a NaN (in any row, pinned rows of log-marginals included)."""
DEFECT_INFINITE = 2
"""Code of an illegal infinity: ``+inf`` (not ``-inf``) in an unpinned row of log-marginals,
any infinity in a denoiser output."""
DEFECT_UNNORMALIZED = 3
"""Code of an answer with an unpinned row whose logsumexp is not 0 (an all ``-inf`` row too)."""
DEFECT_TIME = 4
"""Code of a denoiser called at a negative or non-finite time ``t``."""


class OracleError(AutospecError):
    """An oracle (any-order oracle or denoiser), a parameter or an answer of it breaks the
    contract: shape, dtype, tracing, a non-finite value, an unnormalized row, a bad time.

    Example
    -------
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> try:
    ...     CurieWeissOracle(8, beta=float("nan"))
    ... except OracleError as error:
    ...     print(type(error).__name__)
    OracleError
    """


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (JAX errors run to many lines).

    >>> first_line(ValueError("shape (3,) is wrong\\nmore detail"))
    'shape (3,) is wrong'
    >>> first_line(KeyError())
    'KeyError'
    """
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def describe_defect(
    code: ArrayLike,
    row: ArrayLike | None = None,
    *,
    name: str = "oracle",
    t: object = None,
    log_normalizer: float | None = None,
) -> str:
    """The one-line sentence for one defect code (host side).

    :param code: a ``DEFECT_*`` code (python, numpy or JAX integer).
    :param row: the offending row of log-marginals, or ``None`` for a denoiser output.
    :param name: the subject of the sentence (``"oracle of site 'x'"``, ``"denoiser"``).
    :param t: the time of a denoiser evaluation, quoted when given.
    :param log_normalizer: the logsumexp of an unnormalized row, quoted when given.
    :raises ValueError: for an unknown code.

    >>> describe_defect(DEFECT_NAN, 3, name="oracle of site 'x'")
    "oracle of site 'x' returned NaN in row 3"
    >>> describe_defect(DEFECT_INFINITE, name="denoiser", t=0.5)
    'denoiser returned an infinite value at t=0.5'
    """
    code = int(code)
    where = "" if row is None else f" in row {int(row)}"
    if t is not None:
        where += f" at t={t}"
    if code == DEFECT_OK:
        return f"{name} has no defect"
    if code == DEFECT_NAN:
        return f"{name} returned NaN{where}"
    if code == DEFECT_INFINITE:
        if row is None:
            return f"{name} returned an infinite value{where}"
        return f"{name} returned +inf{where}; a log-probability is at most 0"
    if code == DEFECT_UNNORMALIZED:
        detail = "" if log_normalizer is None else f" (logsumexp={float(log_normalizer):.6g})"
        at_time = "" if t is None else f" at t={t}"
        row_text = "a row" if row is None else f"row {int(row)}"
        return (
            f"{name} returned {row_text} that is not normalized{at_time}{detail}; the row of an "
            "unpinned site must be log-probabilities with logsumexp 0"
        )
    if code == DEFECT_TIME:
        time_text = "" if t is None else f" with t={t}"
        return f"{name} was called{time_text}: t must be finite and non-negative"
    raise ValueError(f"unknown defect code {code}")


def nonfinite_defect(answer) -> tuple[Array, Array]:
    """Traceable check of an answer (a pytree): ``(code, entry)``, code 1 (NaN, first), 2
    (infinity) or 0 and the first offending entry of the flattened leaves.

    >>> [int(value) for value in nonfinite_defect(jnp.array([0.0, 1.0]))]
    [0, 0]
    >>> [int(value) for value in nonfinite_defect(jnp.array([1.0, jnp.inf, jnp.nan]))]
    [1, 2]
    >>> [int(value) for value in nonfinite_defect({"a": jnp.zeros(2), "b": -jnp.inf})]
    [2, 2]
    """
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(answer)])
    nan, inf = jnp.isnan(flat), jnp.isinf(flat)
    code = jnp.where(jnp.any(nan), 1, jnp.where(jnp.any(inf), 2, 0)).astype(jnp.int32)
    return code, jnp.argmax(jnp.where(code == 1, nan, inf)).astype(jnp.int32)


def raise_if_defect(
    code: ArrayLike,
    row: ArrayLike | None = None,
    *,
    name: str = "oracle",
    t: ArrayLike | None = None,
    log_normalizer: ArrayLike | None = None,
    error: type[OracleError] = OracleError,
) -> None:
    """Host side: raise ``error`` if a defect code is set (blocks on ``code``).  For a batch of
    codes (other arguments scalars or of its shape) the first defect is reported with its index.

    :param code: int32 code or array of codes.
    :param row: the offending row(s) of log-marginals; ``None`` for denoiser outputs.
    :param name: the subject of the message.
    :param t: the time(s) of denoiser evaluations, quoted in the message.
    :param log_normalizer: the logsumexp of the offending row(s), quoted for unnormalized rows.
    :param error: the exception type, :class:`OracleError` or a subclass.
    :raises OracleError: (``error``) if any code is not :data:`DEFECT_OK`.
    :raises ValueError: for an unknown code.

    >>> raise_if_defect(0, 0)
    >>> raise_if_defect([0, DEFECT_NAN], [0, 2], name="net")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: net returned NaN in row 2 (batch index 1)
    """
    codes = np.asarray(code)
    flat_codes = codes.reshape(-1)
    defective = np.flatnonzero(flat_codes != DEFECT_OK)
    if defective.size == 0:
        return
    flat_index = int(defective[0])

    def pick(values: ArrayLike | None) -> object:
        if values is None:
            return None
        values = np.asarray(values)
        if values.ndim == 0:
            return values.item()
        if values.size == codes.size:
            return values.reshape(-1)[flat_index].item()
        return None

    message = describe_defect(
        flat_codes[flat_index], pick(row), name=name, t=pick(t), log_normalizer=pick(log_normalizer)
    )
    if codes.ndim > 0:
        batch_index = np.unravel_index(flat_index, codes.shape)
        message += f" (batch index {batch_index[0] if len(batch_index) == 1 else batch_index})"
    raise error(message)


class DenoiserError(OracleError):
    """A denoiser (the oracle of a diffusion process) or a parameter of it breaks the denoiser
    contract; a bad time grid raises the subclass :class:`TimeGridError`.

    >>> issubclass(DenoiserError, OracleError)
    True
    >>> from numpyro_autospec.denoisers._validation import check_denoiser_signature
    >>> check_denoiser_signature(lambda t, y: y, dim=0)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.DenoiserError: dim must be a positive integer, got 0
    """


class TimeGridError(InputError, DenoiserError):
    """A time grid is malformed (not a one-dimensional real array of at least two finite times
    from 0, strictly increasing also in float32) or a grid constructor got a bad number of steps
    or end time.  Both an :class:`InputError` and a :class:`DenoiserError`.

    >>> issubclass(TimeGridError, InputError), issubclass(TimeGridError, DenoiserError)
    (True, True)
    >>> from numpyro_autospec.processes import uniform_times
    >>> uniform_times(0, 1.0)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.TimeGridError: num_steps must be a positive integer, got 0
    """


class ShardingError(ConfigError):
    """The device mesh given to the engine (``Capacity(mesh=...)``) is not usable.

    >>> import jax
    >>> from numpyro_autospec.engine import Capacity, run
    >>> from numpyro_autospec import oracles, processes
    >>> process = processes.AnyOrderProcess(oracles.CurieWeissOracle(8, beta=1.0), 8, 2)
    >>> run(process, jax.random.split(jax.random.PRNGKey(0), 2), capacity=Capacity(mesh="gpu"))
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.ShardingError: capacity.mesh must be a jax.sharding.Mesh, ...
    """


class UnsupportedModelError(AutospecError):
    """The model has a site that ``AutospecKernel`` cannot draw exactly; the message names it
    and what to use instead.

    >>> import numpyro, numpyro.distributions as dist
    >>> from numpyro_autospec.infer import inspect_model
    >>> def regression():  # a latent site with an observed descendant: needs inference
    ...     mean = numpyro.sample("mean", dist.Normal(0.0, 1.0))
    ...     numpyro.sample("y", dist.Normal(mean, 1.0), obs=0.5)
    >>> inspect_model(regression)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.UnsupportedModelError: observed site 'y' depends on \
the latent site 'mean', which would have to be drawn from its posterior, not its prior; for \
posterior inference use AutospecGibbs ...
    """
