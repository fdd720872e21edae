r"""One vocabulary for defective oracle answers, shared by any-order oracles and denoisers.

An oracle answer is checked inside the compiled sampler (pure :mod:`jax.numpy`, see
:func:`numpyro_autospec.oracles.log_marginals_defect` and
:func:`numpyro_autospec.denoisers.denoiser_defect`) and reduced to an int32 code; the host then
turns the code into one readable error with :func:`raise_if_defect`.  The codes are the same for
both kinds of oracle:

=========================  ====  ===========================================================
code                       int   meaning
=========================  ====  ===========================================================
:data:`DEFECT_OK`          0     no defect
:data:`DEFECT_NAN`         1     a NaN anywhere in the answer
:data:`DEFECT_INFINITE`    2     an infinity where none is legal: ``+inf`` in a row of
                                 log-probabilities (``-inf`` is the legal log-probability of
                                 an impossible value), any infinity in a denoiser output
:data:`DEFECT_UNNORMALIZED` 3    a row of log-probabilities whose logsumexp is not 0
:data:`DEFECT_TIME`        4     a denoiser called at a negative or non-finite time
=========================  ====  ===========================================================

The generic check of the engine (NaN: 1, an infinity: 2) uses the same numbers.  The older
names :data:`DEFECT_NONE` and :data:`DEFECT_POSINF` are aliases of :data:`DEFECT_OK` and
:data:`DEFECT_INFINITE`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.exceptions import AutospecError

__all__ = [
    "DEFECT_INFINITE",
    "DEFECT_NAN",
    "DEFECT_NONE",
    "DEFECT_OK",
    "DEFECT_POSINF",
    "DEFECT_TIME",
    "DEFECT_UNNORMALIZED",
    "OracleError",
    "describe_defect",
    "first_line",
    "nonfinite_defect",
    "raise_if_defect",
]

DEFECT_OK = 0
"""Code of an answer without defect."""
DEFECT_NAN = 1
"""Code of an answer with a NaN (in any row, pinned rows of log-marginals included)."""
DEFECT_INFINITE = 2
"""Code of an answer with an illegal infinity (``+inf`` in an unpinned row of log-marginals,
any infinity in a denoiser output)."""
DEFECT_UNNORMALIZED = 3
"""Code of an answer with an unpinned row whose logsumexp is not 0 (an all ``-inf`` row too)."""
DEFECT_TIME = 4
"""Code of a denoiser called at a negative or non-finite time ``t``."""

DEFECT_NONE = DEFECT_OK
"""Alias of :data:`DEFECT_OK` (the denoisers' former name)."""
DEFECT_POSINF = DEFECT_INFINITE
"""Alias of :data:`DEFECT_INFINITE` (the any-order oracles' former name)."""


class OracleError(AutospecError):
    """An oracle (any-order oracle or denoiser) or one of its parameters breaks the contract:
    shape, dtype, tracing, a non-finite parameter, NaN, an illegal infinity, an unnormalized
    row, a bad time.

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
    """The first line of an exception's message (JAX errors run to many lines; the messages of
    this package are one line).

    Example
    -------
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
    """The generic check of an answer (any pytree; traceable): ``(code, entry)``, code
    :data:`DEFECT_NAN` or :data:`DEFECT_INFINITE` (0: none) and the first offending entry of
    the flattened leaves.  A NaN outranks an infinity.

    >>> import jax.numpy as jnp
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
    """Host side: raise ``error`` if a defect code is set; blocks on ``code``.

    A batch of codes is accepted (``row``, ``t`` and ``log_normalizer``, when given, either
    scalars or of the same shape): the first non-zero code is reported with its batch index.

    :param code: int32 code or array of codes.
    :param row: the offending row(s) of log-marginals; ``None`` for denoiser outputs.
    :param name: the subject of the message.
    :param t: the time(s) of denoiser evaluations, quoted in the message.
    :param log_normalizer: the logsumexp of the offending row(s), quoted for unnormalized rows.
    :param error: the exception type, :class:`OracleError` or a subclass
        (:class:`~numpyro_autospec.denoisers.DenoiserError`).
    :raises OracleError: (``error``) if any code is not :data:`DEFECT_OK`.
    :raises ValueError: for an unknown code.

    >>> raise_if_defect(0, 0)
    >>> raise_if_defect([0, DEFECT_NAN], [0, 2], name="net")
    Traceback (most recent call last):
    ...
    numpyro_autospec.defects.OracleError: net returned NaN in row 2 (batch index 1)
    """
    codes = np.asarray(code)
    defective = np.flatnonzero(codes.reshape(-1) != DEFECT_OK)
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
        codes.reshape(-1)[flat_index],
        pick(row),
        name=name,
        t=pick(t),
        log_normalizer=pick(log_normalizer),
    )
    if codes.ndim > 0:
        batch_index = np.unravel_index(flat_index, codes.shape)
        message += f" (batch index {batch_index[0] if len(batch_index) == 1 else batch_index})"
    raise error(message)
