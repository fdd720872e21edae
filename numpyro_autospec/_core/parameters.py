r"""Parameters of oracles and denoisers are data: checked when concrete, traced otherwise.

The numeric parameters of a built-in oracle or denoiser (:math:`\beta`, fields, tables,
points) may be JAX tracers (a latent site, a model argument under ``jit_model_args=True``);
only shapes are static.  A concrete parameter is checked on the host and a violation raises
:class:`~numpyro_autospec.errors.OracleError` (or a subclass) naming the first bad entry; a
traced one is never clipped, and a bad value shows up as NaN answers that the engine's
validation reports.  The object is a pytree of its parameters (:func:`register_parameters`),
compared by identity.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

try:  # JAX's switch behind jax.ensure_compile_time_eval (no public way to turn it off)
    from jax._src.config import eager_constant_folding as _eager_constant_folding
except ImportError:  # pragma: no cover - a JAX without it: constants are folded eagerly
    _eager_constant_folding = None

from numpyro_autospec.errors import OracleError, first_line

__all__ = [
    "abstract_output",
    "concrete_value",
    "shown",
    "is_traced",
    "jit_over_parameters",
    "real_parameter",
    "register_parameters",
    "retains_no_data",
    "staged_constants",
]

T = TypeVar("T", bound=type)


def is_traced(value: Any) -> bool:
    """Whether ``value`` (or any leaf of it) is a JAX tracer."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value))


@contextlib.contextmanager
def staged_constants() -> Iterator[None]:
    """Trace with operations on constants staged into the program, even inside
    :func:`jax.ensure_compile_time_eval` (where each would otherwise be compiled on its own,
    about 20 ms apiece).  Sets JAX's private switch where it exists, a no-op otherwise.

    >>> import jax, jax.numpy as jnp
    >>> with jax.ensure_compile_time_eval(), staged_constants():
    ...     jaxpr = jax.make_jaxpr(lambda x: x + jnp.arange(3))(jnp.zeros(3, jnp.int32))
    >>> "iota" in str(jaxpr)  # staged, not computed while tracing
    True
    """
    if _eager_constant_folding is None:  # pragma: no cover
        yield
        return
    with _eager_constant_folding(False):
        yield


def _first_entry(mask: np.ndarray, values: np.ndarray, name: str) -> str:
    """``"name = v"`` for a scalar, ``"name[i, j] = v"`` for the first entry where ``mask``."""
    if values.ndim == 0:
        return f"{name} = {values.item()}"
    index = tuple(int(i) for i in np.argwhere(mask)[0])
    text = ", ".join(str(i) for i in index)
    return f"{name}[{text}] = {values[index].item()}"


def real_parameter(
    value: ArrayLike,
    name: str,
    *,
    owner: str,
    shape: tuple[int, ...] | None = None,
    minimum: float | None = None,
    error: type[OracleError] = OracleError,
    dtype: type = np.float64,
) -> np.ndarray | Array:
    """A real parameter named ``name`` of ``owner``: ``dtype`` numpy when concrete (after the
    checks: ``shape``, real dtype, finite, at least ``minimum``), else the tracer; a violation
    raises ``error`` naming the first bad entry (messages tested in ``tests/oracles/``)."""
    if is_traced(value):
        given = jnp.result_type(value)
    else:
        value = np.asarray(value)
        given = value.dtype
    if not (jnp.issubdtype(given, jnp.floating) or jnp.issubdtype(given, jnp.integer)):
        raise error(f"{owner}: {name} must be real, got dtype {given}")
    if shape is not None and tuple(jnp.shape(value)) != tuple(shape):
        raise error(f"{owner}: {name} must have shape {tuple(shape)}, got {jnp.shape(value)}")
    if is_traced(value):
        return value if jnp.issubdtype(given, jnp.floating) else value.astype(jnp.float32)
    value = value.astype(dtype)
    bad = ~np.isfinite(value)
    if np.any(bad):
        raise error(f"{owner}: {name} must be finite, got {_first_entry(bad, value, name)}")
    if minimum is not None and np.any(value < minimum):
        entry = _first_entry(value < minimum, value, name)
        raise error(f"{owner}: {name} must be at least {minimum:g}, got {entry}")
    return value


def concrete_value(value: Any, name: str, *, owner: str) -> np.ndarray:
    """``value`` as float64 numpy for a host-side computation; OracleError if traced."""
    if is_traced(value):
        raise OracleError(
            f"{owner}: {name} is a traced value; this host-side computation needs it concrete "
            "(call it outside jit, or with the parameter's value)"
        )
    return np.asarray(value, np.float64)


_PLAIN_TYPES = (
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    type,
    np.dtype,
    np.generic,
    ModuleType,
    BuiltinFunctionType,
)


def retains_no_data(leaf: Any) -> bool:
    """Whether a static pytree leaf keeps no data alive in a program cache: a number, a
    string, a type, a builtin, or a module-level function (also behind ``jax.jit``).

    >>> import functools, jax
    >>> retains_no_data(jax.nn.gelu), retains_no_data(2.0), retains_no_data(len)
    (True, True, True)
    >>> retains_no_data(functools.partial(max, 1))  # a partial may hold data
    False
    """
    if isinstance(leaf, _PLAIN_TYPES):
        return True
    leaf = inspect.unwrap(leaf) if callable(leaf) else leaf
    if not isinstance(leaf, FunctionType):
        return False
    return "<locals>" not in leaf.__qualname__ and not leaf.__closure__


def jit_over_parameters(function: Callable) -> Callable:
    """``jax.jit(function)`` for ``function(owner, *arrays)`` whose first argument (an oracle,
    a denoiser, a network) is split as Equinox's ``filter_jit`` does: array leaves traced,
    other leaves and structure static, so one compilation serves every owner of the same
    structure and shapes.  An owner with a leaf that may keep data alive
    (:func:`retains_no_data`) is closed over instead.  ``.eval_shape(owner, *arrays)`` gives
    the output's shapes the same way (tested in ``tests/oracles/test_probes.py``).
    """

    def compiled(structure, static_leaves, array_leaves, *args):
        arrays = iter(array_leaves)
        leaves = [next(arrays) if leaf is None else leaf for leaf in static_leaves]
        return function(jax.tree.unflatten(structure, leaves), *args)

    compiled.__name__ = compiled.__qualname__ = function.__name__  # the program's name
    compiled = jax.jit(compiled, static_argnums=(0, 1))

    def split(owner) -> tuple | None:
        leaves, structure = jax.tree.flatten(owner)
        is_array = [isinstance(leaf, jax.Array | np.ndarray) for leaf in leaves]
        # tree leaves are never None: it marks the places of the array leaves
        static_leaves = tuple(
            None if array else leaf for leaf, array in zip(leaves, is_array, strict=True)
        )
        if not all(retains_no_data(leaf) for leaf in static_leaves if leaf is not None):
            return None
        array_leaves = [leaf for leaf, array in zip(leaves, is_array, strict=True) if array]
        return structure, static_leaves, array_leaves

    @functools.wraps(function)
    def call(owner, *args):
        parts = split(owner)
        if parts is None:
            return jax.jit(functools.partial(function, owner))(*args)
        return compiled(*parts, *args)

    def eval_shape(owner, *args):
        """The output's shapes and dtypes (:func:`jax.eval_shape`)."""
        parts = split(owner)
        if parts is None:
            return jax.eval_shape(functools.partial(function, owner), *args)
        return compiled.eval_shape(*parts, *args)

    call.eval_shape = eval_shape
    return call


def register_parameters(data_fields: tuple[str, ...], static_fields: tuple[str, ...]) -> Callable:
    """Class decorator: a pytree with children ``data_fields`` and auxiliary data
    ``static_fields``; unflattening bypasses ``__init__`` (used by every built-in oracle)."""

    def register(cls: T) -> T:
        def flatten(obj: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            children = tuple(getattr(obj, field) for field in data_fields)
            return children, tuple(getattr(obj, field) for field in static_fields)

        def unflatten(aux: tuple[Any, ...], children: tuple[Any, ...]) -> Any:
            obj = object.__new__(cls)
            for field, value in zip(data_fields, children, strict=True):
                setattr(obj, field, value)
            for field, value in zip(static_fields, aux, strict=True):
                setattr(obj, field, value)
            return obj

        jax.tree_util.register_pytree_node(cls, flatten, unflatten)
        return cls

    return register


def abstract_output(
    evaluate: Callable[[], Any], error: type[Exception], traced: str, expected: str
) -> jax.ShapeDtypeStruct:
    """The one array of the shape evaluation ``evaluate()``, run under
    :func:`staged_constants`; raises ``error`` with ``traced`` when tracing fails, with
    ``expected`` when the output is not one array (tested in ``tests/*/test_validation.py``).
    """
    try:
        with staged_constants():
            output = evaluate()
    except Exception as failure:
        raise error(f"{traced}: {type(failure).__name__}: {first_line(failure)}") from failure
    if not isinstance(output, jax.ShapeDtypeStruct):
        raise error(f"{expected}, got {jax.tree_util.tree_structure(output)}")
    return output


def shown(value: ArrayLike) -> str:
    """A scalar parameter as an oracle's ``repr`` shows it: its value, or ``traced``.

    >>> import jax
    >>> shown(0.25), jax.jit(lambda beta: print(shown(beta)) or beta)(1.0) is not None
    traced
    ('0.25', True)
    """
    return "traced" if is_traced(value) else f"{float(value):g}"
