r"""Parameters of oracles and denoisers are data: checked when concrete, traced otherwise.

A built-in oracle (:class:`~numpyro_autospec.oracles.CurieWeissOracle`, ...) or denoiser
(:class:`~numpyro_autospec.denoisers.PointCloudDenoiser`, ...) takes its numeric parameters
(:math:`\beta`, fields, tables, points) as *data*: they may be JAX tracers, e.g. a latent site
``beta = numpyro.sample("beta", ...)`` or a model argument under ``MCMC(...,
jit_model_args=True)``.  Only shapes are static.  The rules:

* a concrete parameter is checked on the host (finite, non-negative, ...) and a violation
  raises the package's error (:class:`~numpyro_autospec.errors.OracleError` or a subclass)
  naming the class, the parameter and the first offending entry;
* a traced parameter is never clipped or replaced: a bad value shows up as NaN or infinite
  answers, which the engine's in-program answer validation reports
  (:mod:`numpyro_autospec.errors`);
* the object is a pytree whose leaves are its parameters (:func:`register_parameters`), with
  equality and hashing by identity, so ``jit`` can take it as an argument and a NumPyro
  distribution can flatten it as data.
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
    """Whether ``value`` (or any leaf of it) is a JAX tracer, i.e. not known on the host.

    >>> import jax, jax.numpy as jnp
    >>> seen = []
    >>> _ = jax.jit(lambda beta: seen.append(is_traced({"beta": beta})) or beta)(1.0)
    >>> is_traced(jnp.ones(3)), seen
    (False, [True])
    """
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value))


@contextlib.contextmanager
def staged_constants() -> Iterator[None]:
    """Trace with operations on constants staged into the program, even inside
    :func:`jax.ensure_compile_time_eval`.

    The kernel inspects a model under that context (so that the model's own concrete values
    stay concrete when ``init`` is traced, as for ``chain_method="parallel"``).  There, every
    operation on constants inside a function being traced -- an oracle's ``jnp.arange(n)`` or
    table of log-factorials, met by the abstract signature checks, the probes and the shape
    evaluations -- would run eagerly, each one compiled on its own (about 20 ms apiece, a
    second in all before a first draw).  The checks wrap their tracing in this context.
    JAX has no public switch back, so this sets the state behind
    ``ensure_compile_time_eval`` where it exists (a no-op otherwise).

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
    """A real parameter: ``dtype`` numpy when concrete (after the host checks), else the tracer.

    :param value: the parameter (python number, numpy or JAX array, or a tracer).
    :param name: the parameter's name, quoted in messages.
    :param owner: the class (or function) that takes it, quoted in messages.
    :param shape: the required shape, checked for tracers too (shapes are static).
    :param minimum: if given, concrete entries must be at least this.
    :param error: the exception type.
    :param dtype: the numpy dtype of a concrete value (float64: exact host-side laws).
    :raises OracleError: (``error``) for a wrong shape or a non-real dtype, and for a concrete
        value with a non-finite entry or an entry below ``minimum``, naming the first one.

    >>> float(real_parameter(0.5, "beta", owner="CurieWeissOracle"))
    0.5
    >>> real_parameter([1.0, float("nan")], "fields", owner="IsingChainOracle")
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: IsingChainOracle: fields must be finite, got \
fields[1] = nan
    """
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
    """``value`` as a float64 numpy array for a host-side computation (an exact law by
    enumeration), or an :class:`~numpyro_autospec.errors.OracleError` if it is traced.

    >>> import jax
    >>> concrete_value(0.5, "beta", owner="exact_law")
    array(0.5)
    >>> jax.jit(lambda beta: concrete_value(beta, "beta", owner="exact_law"))(0.5)
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.OracleError: exact_law: beta is a traced value; this host-side ...
    """
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
    """Whether a static (non-array) pytree leaf keeps no data alive when a program cache holds
    it: a number, a string, a type, a builtin, or a function defined at module level (not
    inside another function, whose closure or defaults may hold data; not a bound method),
    also behind ``jax.jit`` or ``functools.wraps``.

    >>> import functools, jax
    >>> retains_no_data(jax.nn.gelu), retains_no_data(2.0), retains_no_data(len)
    (True, True, True)
    >>> def scaled(scale):
    ...     return lambda x: scale * x  # a closure: keeps ``scale`` alive
    >>> retains_no_data(scaled(jax.numpy.ones(3))), retains_no_data(functools.partial(max, 1))
    (False, False)
    """
    if isinstance(leaf, _PLAIN_TYPES):
        return True
    leaf = inspect.unwrap(leaf) if callable(leaf) else leaf
    if not isinstance(leaf, FunctionType):
        return False
    # defined inside a function: it may hold data in its closure or its defaults
    return "<locals>" not in leaf.__qualname__ and not leaf.__closure__


def jit_over_parameters(function: Callable) -> Callable:
    """``jax.jit(function)`` for ``function(owner, *arrays)`` whose first argument, an oracle,
    a denoiser or a network, is taken apart as Equinox's ``filter_jit`` does: its array leaves
    (the parameters) are traced arguments, its other leaves (functions, numbers, strings) and
    its structure are static.  One compilation then serves every owner of the same structure
    and shapes: the probes of ``AutospecKernel.init`` compile once for a model's oracle,
    whatever its parameter values or the model arguments of a later ``MCMC.run`` (a fresh
    ``jax.jit`` of a closure over the owner compiled again at every run).  The static leaves
    are kept by JAX's program cache, so only leaves that keep no data alive are taken as
    static (:func:`retains_no_data`: numbers, strings, types, functions defined at module
    level); an owner with any other non-array leaf (a closure, a bound method, an object) is
    closed over instead, as before: one compilation per call, nothing kept.  The result's
    ``eval_shape(owner, *arrays)`` gives the output's shapes, traced once per structure and
    shapes in the same way.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> traces = []
    >>> def total(oracle, x):
    ...     traces.append(1)
    ...     return jnp.sum(oracle(x, jnp.zeros(4, bool)))
    >>> program = jit_over_parameters(total)
    >>> x = jnp.zeros(4, jnp.int32)
    >>> first = program(CurieWeissOracle(4, beta=0.5), x)
    >>> second = program(CurieWeissOracle(4, beta=1.5), x)  # new values: no new trace
    >>> len(traces)
    1
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
        """The output's shapes and dtypes (:func:`jax.eval_shape`), traced once per owner
        structure and argument shapes."""
        parts = split(owner)
        if parts is None:
            return jax.eval_shape(functools.partial(function, owner), *args)
        return compiled.eval_shape(*parts, *args)

    call.eval_shape = eval_shape
    return call


def register_parameters(data_fields: tuple[str, ...], static_fields: tuple[str, ...]) -> Callable:
    """Class decorator: register the class as a pytree whose children are ``data_fields`` and
    whose auxiliary data are ``static_fields`` (ints, shapes).  Unflattening bypasses
    ``__init__`` (children may be tracers or placeholders: no checks).  Equality and hashing
    stay those of ``object`` (identity).

    >>> import jax, jax.numpy as jnp
    >>> @register_parameters(data_fields=("scale",), static_fields=("size",))
    ... class Scaled:
    ...     def __init__(self, scale, size):
    ...         self.scale, self.size = scale, size
    >>> jax.tree.leaves(Scaled(2.0, 3))
    [2.0]
    >>> jax.jit(lambda scaled: scaled.scale * jnp.ones(scaled.size))(Scaled(2.0, 3)).tolist()
    [2.0, 2.0, 2.0]
    """

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
    """The one array ``evaluate()`` returns, a shape evaluation (:func:`jax.eval_shape`) run
    with constants staged (:func:`staged_constants`): the abstract signature check of an
    oracle, a block form or a denoiser.  Raises ``error`` with ``traced`` (the function and
    its argument shapes) when tracing fails, with ``expected`` (the array it must return) when
    the output is not one array.

    >>> import jax, jax.numpy as jnp
    >>> spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    >>> abstract_output(lambda: jax.eval_shape(jnp.sin, spec), ValueError, "sin", "one array")
    ShapeDtypeStruct(shape=(3,), dtype=float32)
    >>> pair = lambda: jax.eval_shape(lambda y: (y, y), spec)
    >>> abstract_output(pair, ValueError, "f", "f must return one array")
    Traceback (most recent call last):
    ...
    ValueError: f must return one array, got PyTreeDef((*, *))
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
