"""Validation of oracles and of the inputs of any-order sites, with errors that name the
site, the shape or the value.  ``log_marginals_defect`` is pure ``jnp`` so the engine can run
it inside ``jit`` on every answer (and raise through a host callback)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = [
    "OracleError",
    "DEFECT_OK",
    "DEFECT_NAN",
    "DEFECT_POSINF",
    "DEFECT_UNNORMALIZED",
    "check_oracle_signature",
    "log_marginals_defect",
    "describe_defect",
    "raise_if_defect",
    "validate_oracle",
    "check_values_in_support",
    "check_permutation",
]

DEFECT_OK, DEFECT_NAN, DEFECT_POSINF, DEFECT_UNNORMALIZED = 0, 1, 2, 3


class OracleError(ValueError):
    """An oracle broke the protocol (shape, NaN, +inf, unnormalized row)."""


def check_oracle_signature(oracle, num_positions: int, num_categories: int, *, name="oracle"):
    """Trace the oracle on ``(int32[n], bool[n])`` and check it returns ``float[n, q]``."""
    n, q = int(num_positions), int(num_categories)
    x = jax.ShapeDtypeStruct((n,), jnp.int32)
    mask = jax.ShapeDtypeStruct((n,), jnp.bool_)
    try:
        out = jax.eval_shape(oracle, x, mask)
    except Exception as error:  # noqa: BLE001 - re-raised with the site's name
        raise OracleError(
            f"oracle {name!r} failed when traced on (int32[{n}], bool[{n}]): "
            f"{type(error).__name__}: {error}"
        ) from error
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape != (n, q) or dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise OracleError(
            f"oracle {name!r} must return log-marginals of shape ({n}, {q}) and a float dtype, "
            f"got shape {shape} and dtype {dtype}"
        )


def log_marginals_defect(log_probs: Array, mask: Array, *, atol: float = 1e-4):
    """``(code, row, value)``: the first defect of an answer (pure ``jnp``).

    code 0: ok; 1: NaN anywhere; 2: +inf in an unpinned row; 3: an unpinned row whose
    logsumexp is not 0 within ``atol`` (``value`` is that logsumexp)."""
    nan_rows = jnp.any(jnp.isnan(log_probs), axis=-1)
    posinf_rows = jnp.any(log_probs == jnp.inf, axis=-1) & ~mask
    total = jax.nn.logsumexp(jnp.where(jnp.isnan(log_probs), -jnp.inf, log_probs), axis=-1)
    bad_rows = ~(jnp.abs(total) <= atol) & ~mask & ~nan_rows & ~posinf_rows
    code = jnp.where(
        jnp.any(nan_rows),
        DEFECT_NAN,
        jnp.where(
            jnp.any(posinf_rows),
            DEFECT_POSINF,
            jnp.where(jnp.any(bad_rows), DEFECT_UNNORMALIZED, DEFECT_OK),
        ),
    ).astype(jnp.int32)
    rows = jnp.where(
        code == DEFECT_NAN, nan_rows, jnp.where(code == DEFECT_POSINF, posinf_rows, bad_rows)
    )
    row = jnp.argmax(rows).astype(jnp.int32)
    return code, row, total[row]


def describe_defect(code, row, value=None, *, name="oracle") -> str:
    code, row = int(code), int(row)
    if code == DEFECT_NAN:
        return f"oracle {name!r} returned NaN in row {row} of log_marginals"
    if code == DEFECT_POSINF:
        return f"oracle {name!r} returned +inf in row {row} of log_marginals"
    if code == DEFECT_UNNORMALIZED:
        detail = "" if value is None else f" (logsumexp = {float(value):.6g})"
        return (
            f"oracle {name!r}: row {row} of log_marginals is not normalized{detail}; "
            "rows of unpinned sites must be log-probabilities summing to 1"
        )
    return f"oracle {name!r}: ok"


def raise_if_defect(code, row, value=None, *, name="oracle") -> None:
    """Host side: raise :class:`OracleError` for the first nonzero code (batches allowed)."""
    code, row = np.asarray(code).ravel(), np.asarray(row).ravel()
    value = None if value is None else np.asarray(value).ravel()
    bad = np.flatnonzero(code)
    if bad.size:
        i = bad[0]
        raise OracleError(
            describe_defect(code[i], row[i], None if value is None else value[i], name=name)
        )


def validate_oracle(
    oracle, num_positions, num_categories, *, name="oracle", key=None, num_probes=8, atol=1e-4
) -> None:
    """Eager check: signature, then answers on probe inputs (empty mask, random masks)."""
    check_oracle_signature(oracle, num_positions, num_categories, name=name)
    n, q = int(num_positions), int(num_categories)
    rng = np.random.default_rng(
        0
        if key is None
        else int(
            np.asarray(
                jax.random.key_data(key)
                if jax.dtypes.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key)
                else key
            ).ravel()[-1]
        )
    )
    xs = rng.integers(0, q, size=(num_probes, n)).astype(np.int32)
    masks = rng.random((num_probes, n)) < rng.random((num_probes, 1))
    masks[0] = False

    @jax.jit
    def probe(xs, masks):
        answers = jax.vmap(oracle)(xs, masks)
        return jax.vmap(lambda a, m: log_marginals_defect(a, m, atol=atol))(answers, masks)

    raise_if_defect(*probe(jnp.asarray(xs), jnp.asarray(masks)), name=name)


def check_values_in_support(values, num_categories: int, *, name="x") -> None:
    """Concrete integer values must lie in ``[0, q)``; the error names the index and value."""
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        if np.issubdtype(values.dtype, np.floating) and np.all(np.mod(values, 1) == 0):
            values = values.astype(np.int64)
        else:
            raise ValueError(
                f"site {name!r}: observed values must be integers, got dtype {values.dtype}"
            )
    bad = np.flatnonzero((values < 0) | (values >= num_categories))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"site {name!r}: observed value {int(values.ravel()[i])} at index {i} "
            f"is outside the support [0, {num_categories})"
        )


def check_permutation(order, num_positions: int, *, name="order") -> None:
    """``order`` must be a permutation of ``range(n)``; the error says what is wrong."""
    order = np.asarray(order)
    n = int(num_positions)
    if order.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {order.shape}")
    if not np.issubdtype(order.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {order.dtype}")
    counts = np.bincount(np.clip(order, 0, n), minlength=n + 1)
    outside = order[(order < 0) | (order >= n)]
    if outside.size:
        raise ValueError(
            f"{name} is not a permutation of range({n}): value {int(outside[0])} is out of range"
        )
    if np.any(counts[:n] != 1):
        duplicated = int(np.flatnonzero(counts[:n] > 1)[0])
        missing = int(np.flatnonzero(counts[:n] == 0)[0])
        raise ValueError(
            f"{name} is not a permutation of range({n}): {duplicated} appears "
            f"{int(counts[duplicated])} times and {missing} is missing"
        )
