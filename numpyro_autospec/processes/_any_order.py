"""Any-order autoregressive sampling on :math:`[q]^n` as a process (docs/algorithm.md, section 2a).

The oracle is ``log_marginals(x, mask) -> [n, q]`` with
:math:`\\log \\mu(X_i = v \\mid X_{\\text{mask}} = x_{\\text{mask}})` in row ``i``.  Observed
sites come first and are never sampled (infilling); a uniformly random order :math:`\\sigma`
of the free sites is drawn per sample, and step ``k`` fixes site :math:`\\sigma(P + k)`,
``P`` the number of observed sites.

* target: the conditional of site :math:`\\sigma(P+k)` given the sites :math:`\\sigma(<P+k)`;
* speculation for the block :math:`S = [a, a+m)`: the product of the conditionals of the sites
  :math:`\\sigma(P+a), \\dots, \\sigma(P+a+m-1)`, all given the prefix before step ``a``, the
  ``R >= m`` rows of one query ``O_a = query(x, a, R)``.

The output law is exactly :math:`\\mu` given the observed sites for a consistent oracle, and
:math:`\\prod_k p(x_{\\sigma(k)} \\mid x_{\\sigma(<k)})` (sequential any-order sampling) for a
learned one.  Reference: Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869 (2025).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec._core.rejection import categorical_rows
from numpyro_autospec.errors import InputError, OracleError, describe_defect
from numpyro_autospec.oracles._base import FunctionOracle, as_oracle
from numpyro_autospec.oracles._consistency import check_block_form_signature
from numpyro_autospec.oracles._validation import (
    check_permutation,
    check_values_in_support,
    log_marginals_defect,
)

__all__ = ["AnyOrderProcess", "AnyOrderState"]


class AnyOrderState(NamedTuple):
    """State of one any-order draw: ``values[i]`` the value of site ``i`` (once fixed),
    ``order[j]`` the site fixed at position ``j`` (observed sites first), ``rank`` its inverse.

    >>> import jax, numpy as np
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> mask = np.array([0, 0, 1, 0], bool)
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=0.5), 4, 2,
    ...                           observed_values=mask.astype(int), observed_mask=mask)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> int(x.order[0]), int(x.values[2]), x.rank[x.order].tolist(), process.num_steps
    (2, 1, [0, 1, 2, 3], 3)
    """

    values: Array
    order: Array
    rank: Array


class AnyOrderProcess:
    """Any-order sampling from ``log_marginals`` over ``num_positions`` sites and
    ``num_categories`` values, optionally with observed (pinned) sites and a fixed order.

    Parameters
    ----------
    log_marginals:
        the oracle: an :class:`~numpyro_autospec.oracles.AnyOrderOracle` (its block form
        ``log_conditionals`` is used when it declares ``scores_blocks`` or
        ``depends_on_order``), or a JAX-traceable ``(x: int32[n], mask: bool[n]) ->
        float[n, q]``.
    num_positions, num_categories:
        ``n`` and ``q``.
    observed_values, observed_mask:
        arrays of shape ``[n]``: sites with ``observed_mask`` True are pinned to
        ``observed_values`` (in ``[0, q)``).  The mask must be concrete (the number of steps
        is static).
    order:
        a fixed permutation of ``range(n)`` instead of a random order (observed sites still
        come first).
    name:
        site name used in error messages.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> process = AnyOrderProcess(CurieWeissOracle(8, beta=1.0), 8, 2)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> process.query(x, 0, 8).shape  # the conditionals of the next 8 steps, one evaluation
    (8, 2)
    """

    final_query = False
    #: single-step queries gather their slot's state (no in-place batched forms)
    batched_queries = False
    #: a speculation reads its answer's rows, already sized by the engine (no ``max_length``)
    bounded_speculation = False
    discrete_steps = True

    def __init__(
        self,
        log_marginals: Callable[[Array, Array], Array],
        num_positions: int,
        num_categories: int,
        *,
        observed_values=None,
        observed_mask=None,
        order=None,
        name: str = "x",
    ) -> None:
        n, q = int(num_positions), int(num_categories)
        if n < 1 or q < 1:
            raise InputError(f"site {name!r}: need num_positions >= 1 and num_categories >= 1")
        self.oracle = as_oracle(log_marginals, n, q)
        self.oracle_name = getattr(log_marginals, "__qualname__", type(log_marginals).__name__)
        self.scores_blocks = bool(self.oracle.scores_blocks)
        #: declared by the oracle: rows per block-form call (``None``: a whole query)
        self.rows_per_call = self.oracle.rows_per_call
        if self.oracle.scores_blocks or self.oracle.depends_on_order:
            check_block_form_signature(self.oracle, name=f"site {name!r}: {self.oracle_name}")
        self.num_positions = n
        self.num_categories = q
        self.name = name
        if observed_mask is None:
            if observed_values is not None:
                raise InputError(f"site {name!r}: observed_values given without observed_mask")
            mask = np.zeros(n, dtype=bool)
            values = np.zeros(n, dtype=np.int32)
        else:
            if isinstance(observed_mask, jax.core.Tracer):
                raise InputError(
                    f"site {name!r}: observed_mask must be concrete (not traced): the number "
                    "of sampled steps is a static shape"
                )
            mask = np.asarray(observed_mask)
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise InputError(
                    f"site {name!r}: observed_mask must be a bool array of shape ({n},), "
                    f"got {mask.dtype} {mask.shape}"
                )
            if observed_values is None:
                raise InputError(f"site {name!r}: observed_mask given without observed_values")
            traced = isinstance(observed_values, jax.core.Tracer)
            values = observed_values if traced else np.asarray(observed_values)
            if values.shape != (n,):
                raise InputError(
                    f"site {name!r}: observed_values must have shape ({n},), got {values.shape}"
                )
            if not traced:
                check_values_in_support(np.where(mask, values, 0), q, name=name)
        self.observed_mask = mask
        self.observed_values = jnp.where(jnp.asarray(mask), jnp.asarray(values), 0).astype(
            jnp.int32
        )
        self.num_observed = int(mask.sum())
        self.num_steps = n - self.num_observed
        self._observed_sites = np.flatnonzero(mask).astype(np.int32)
        self._free_sites = np.flatnonzero(~mask).astype(np.int32)
        if order is None:
            self.order = None
        else:
            order = np.asarray(order)
            check_permutation(order, n, name=f"order of site {name!r}")
            self.order = order[~mask[order]].astype(np.int32)

    def init(self, key: Array) -> AnyOrderState:
        """Draw the order (observed sites first) and place the observed values."""
        if self.order is None:
            free = jax.random.permutation(key, jnp.asarray(self._free_sites))
        else:
            free = jnp.asarray(self.order)
        order = jnp.concatenate([jnp.asarray(self._observed_sites), free]).astype(jnp.int32)
        rank = (
            jnp.zeros(self.num_positions, jnp.int32)
            .at[order]
            .set(jnp.arange(self.num_positions, dtype=jnp.int32))
        )
        return AnyOrderState(values=self.observed_values, order=order, rank=rank)

    def _site(self, x: AnyOrderState, k: Array) -> Array:
        return x.order[self.num_observed + k]

    def _positions(self, k: Array, num_rows: int) -> Array:
        """Positions in the order of steps ``k..k+num_rows-1`` (clamped to the last site)."""
        start = self.num_observed + k
        return jnp.minimum(start + jnp.arange(num_rows, dtype=jnp.int32), self.num_positions - 1)

    def query(self, x: AnyOrderState, k: Array, num_rows: int = 1) -> Array:
        """``[num_rows, q]``: row ``j`` the conditional of the site of step ``k + j`` given the
        sites fixed before step ``k`` (rows past the last step repeat the last site's)."""
        sites = x.order[self._positions(k, num_rows)]
        if self.oracle.depends_on_order or (self.scores_blocks and num_rows == 1):
            prefix = jnp.full((num_rows,), self.num_observed + k, jnp.int32)
            return self.oracle.log_conditionals(x.values, x.rank, sites, prefix)
        return self.oracle.log_marginals(x.values, x.rank < self.num_observed + k)[sites]

    def score_block(self, x: AnyOrderState, a: Array, num_rows: int) -> Array:
        """The target rows of steps ``a..a+num_rows-1``: one ``log_conditionals`` call."""
        return self._target_rows(x, a + jnp.arange(num_rows, dtype=jnp.int32))

    def _target_rows(self, x: AnyOrderState, steps: Array) -> Array:
        """Row ``j``: the conditional of the site of step ``steps[j]`` given the sites fixed
        before it, in one ``log_conditionals`` call."""
        positions = jnp.minimum(self.num_observed + steps, self.num_positions - 1)
        return self.oracle.log_conditionals(x.values, x.rank, x.order[positions], positions)

    def score_and_query(
        self, x: AnyOrderState, steps: Array, k: Array, num_rows: int
    ) -> tuple[Array, Array]:
        """The target rows of ``steps`` (``[L, q]``) and ``query(x, k, num_rows)``: one
        ``log_conditionals`` call for an order-dependent oracle, else one call of each form."""
        if not self.oracle.depends_on_order:
            return self._target_rows(x, steps), self.query(x, k, num_rows)
        positions = jnp.minimum(self.num_observed + steps, self.num_positions - 1)
        answer_positions = self._positions(k, num_rows)
        answer_prefix = jnp.full((num_rows,), self.num_observed + k, jnp.int32)
        rows = self.oracle.log_conditionals(
            x.values,
            x.rank,
            x.order[jnp.concatenate([positions, answer_positions])],
            jnp.concatenate([positions, answer_prefix]),
        )
        return rows[: steps.shape[0]], rows[steps.shape[0] :]

    def rows_defect(
        self, x: AnyOrderState, steps: Array, rows: Array, valid: Array
    ) -> tuple[Array, Array, Array]:
        """``(code, site, row)`` of the first defect among the ``valid`` scoring rows."""
        checked = jnp.where(valid[:, None], rows, -jnp.log(jnp.float32(self.num_categories)))
        code, row = log_marginals_defect(checked, ~valid)
        position = jnp.minimum(self.num_observed + steps[row], self.num_positions - 1)
        return code, x.order[position], row

    def reduce(self, x: AnyOrderState, k: Array, answer: Array) -> Array:
        """The first row of ``query(x, k, .)``."""
        return answer[0]

    def target_logp(self, x: AnyOrderState, k: Array, reduced: Array) -> Array:
        return reduced[x.values[self._site(x, k)]]

    def target_sample(self, key: Array, x: AnyOrderState, k: Array, reduced: Array):
        value = jax.random.categorical(key, reduced).astype(jnp.int32)
        return x._replace(values=x.values.at[self._site(x, k)].set(value))

    def spec_sample(self, key: Array, x: AnyOrderState, a: Array, m: Array, answer: Array):
        """Draw the sites of steps ``a..a+m-1`` independently from the rows of ``answer``."""
        rows = answer.shape[0]
        draw = categorical_rows(key, answer)
        in_block = jnp.arange(rows) < m
        positions = self._positions(a, rows)
        sites = jnp.where(in_block, x.order[positions], self.num_positions)
        return x._replace(values=x.values.at[sites].set(draw, mode="drop"))

    def spec_logp(self, x: AnyOrderState, a: Array, m: Array, answer: Array) -> Array:
        rows = answer.shape[0]
        values = x.values[x.order[self._positions(a, rows)]]
        picked = jnp.take_along_axis(answer, values[:, None], axis=-1)[:, 0]
        return jnp.sum(jnp.where(jnp.arange(rows) < m, picked, 0.0))

    def spec_reduce(self, x: AnyOrderState, a: Array, k: Array, answer: Array) -> Array:
        """The speculation row of step ``k`` in ``answer = query(x, a, R)``."""
        return answer[jnp.clip(k - a, 0, answer.shape[0] - 1)]

    def step_value(self, x: AnyOrderState, k: Array) -> Array:
        return x.values[self._site(x, k)]

    def set_step_value(self, x: AnyOrderState, k: Array, value: Array) -> AnyOrderState:
        return x._replace(values=x.values.at[self._site(x, k)].set(value.astype(jnp.int32)))

    defect_error = OracleError

    def answer_defect(self, x: AnyOrderState, k: Array, answer: Array) -> tuple[Array, Array]:
        """``(code, site)`` of the first defect of ``answer`` (rows past the last step are
        padding, not checked)."""
        positions = self.num_observed + k + jnp.arange(answer.shape[0])
        padding = positions >= self.num_positions
        code, row = log_marginals_defect(answer, padding)
        site = x.order[jnp.minimum(positions[row], self.num_positions - 1)]
        return code, site

    def describe_defect(self, code: int, row: int, step: int) -> str:
        """Host side: the message for a defect found by :meth:`answer_defect` (``row``: site)."""
        block = self.oracle.depends_on_order or self.oracle.scores_blocks
        form = "log_conditionals" if block else "log_marginals"
        # a plain function by its own name, an oracle class by the method that answered
        function = (
            self.oracle_name
            if isinstance(self.oracle, FunctionOracle)
            else f"{self.oracle_name}.{form}"
        )
        message = describe_defect(code, row, name=function)
        return f"site {self.name!r}: {message} (query at step {step})"

    def output(self, x: AnyOrderState, final_answer=None) -> Array:
        return x.values
