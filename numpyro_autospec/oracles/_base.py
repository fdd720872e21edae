r"""The any-order oracle protocol: set form ``log_marginals`` and block form ``log_conditionals``.

An any-order oracle answers conditionals of a law :math:`p` on :math:`[q]^n` (docs/algorithm.md,
section 2a; Anari et al., "Parallel Sampling via Autospeculation", arXiv:2511.07869).

**Block form**, for an order given by its inverse ``ranks``: ``log_conditionals(x: int32[n],
ranks: int32[n], sites: int32[L], prefix_lengths: int32[L]) -> float[L, q]``, row :math:`j`
being :math:`\log p(X_{s_j} = \cdot \mid X_i = x_i \text{ for all } i \text{ with }
\text{ranks}[i] < \ell_j)`, :math:`s_j` = ``sites[j]``, :math:`\ell_j` = ``prefix_lengths[j]``;
one call serves a block's speculation and its scoring (``L`` static, padded rows ignored).

**Set form**, when the conditionals depend only on the pinned set (exact models, masked
networks): ``log_marginals(x: int32[n], mask: bool[n]) -> float[n, q]``, row :math:`i` being
:math:`\log p(X_i = \cdot \mid X_S = x_S)`, :math:`S = \{i : \text{mask}_i\}`; the default
block form is derived from it.  Order-dependent oracles implement the block form only.

Rows are log-probability vectors (``-inf`` for an impossible value, never ``NaN`` or ``+inf``);
set-form rows at pinned sites may hold anything but NaN.  Oracles must be ``vmap``-able.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax import Array

__all__ = [
    "AnyOrderOracle",
    "FunctionOracle",
    "as_oracle",
    "block_indices",
    "marginal_conditionals",
]


def marginal_conditionals(
    log_marginals: Callable[[Array, Array], Array],
    x: Array,
    ranks: Array,
    sites: Array,
    prefix_lengths: Array,
) -> Array:
    """The block form derived from the set form: row ``j`` is row ``sites[j]`` of
    ``log_marginals(x, ranks < prefix_lengths[j])``, one evaluation per row."""

    def row(site: Array, length: Array) -> Array:
        return log_marginals(x, ranks < length)[site]

    return jax.vmap(row)(jnp.asarray(sites, jnp.int32), jnp.asarray(prefix_lengths, jnp.int32))


def block_indices(ranks: Array, prefix_lengths: Array, num_positions: int) -> tuple[Array, Array]:
    """``ranks`` as int32 and ``prefix_lengths`` as int32 clipped to :math:`[0, n]`.

    >>> block_indices(jnp.array([1, 0]), jnp.array([-1, 1, 5]), 2)[1].tolist()
    [0, 1, 2]
    """
    ranks = jnp.asarray(ranks, jnp.int32)
    return ranks, jnp.clip(jnp.asarray(prefix_lengths, jnp.int32), 0, num_positions)


class AnyOrderOracle(abc.ABC):
    r"""Base class of any-order oracles: ``num_positions`` :math:`n` sites with
    ``num_categories`` :math:`q` values each.

    A subclass implements :meth:`log_marginals` (set form; the block form is then derived) or,
    with ``depends_on_order = True``, :meth:`log_conditionals` only.  A subclass that computes a
    whole block in one evaluation overrides :meth:`log_conditionals` and declares
    ``scores_blocks = True``.  Calling the oracle is :meth:`log_marginals`.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> isinstance(CurieWeissOracle(4, beta=0.5), AnyOrderOracle)
    True
    >>> uniform = lambda x, mask: jnp.full((4, 3), -jnp.log(3.0))  # a plain-function oracle
    >>> isinstance(uniform, AnyOrderOracle), isinstance(as_oracle(uniform, 4, 3), AnyOrderOracle)
    (False, True)
    """

    num_positions: int
    num_categories: int

    #: ``log_conditionals`` computes its ``L`` rows in one evaluation (declared fast path)
    scores_blocks: ClassVar[bool] = False
    #: the conditionals depend on the order of the prefix, not only on the pinned set
    depends_on_order: ClassVar[bool] = False
    #: with ``scores_blocks``: the most rows per ``log_conditionals`` call when each row costs
    #: about a small call (the engine splits larger queries); ``None``: one call per query
    rows_per_call: ClassVar[int | None] = None

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """``float[n, q]`` log conditional marginals given ``x`` on ``mask`` (set form)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no log_marginals: its conditionals depend on the order "
            "of the prefix; use log_conditionals"
        )

    def log_conditionals(
        self, x: Array, ranks: Array, sites: Array, prefix_lengths: Array
    ) -> Array:
        """``float[L, q]``: row ``j`` is the law of site ``sites[j]`` given the sites of rank
        below ``prefix_lengths[j]`` (block form).  Default: from :meth:`log_marginals`."""
        return marginal_conditionals(self.log_marginals, x, ranks, sites, prefix_lengths)

    def log_prob(self, x: Array) -> Array:
        """The exact joint :math:`\\log \\mu(x)` of a full configuration ``int[n]``: optional,
        overridden by an oracle that has one (posterior inference with
        :class:`~numpyro_autospec.AutospecGibbs` needs it)."""
        raise NotImplementedError(f"{type(self).__name__} has no exact joint log_prob")

    def __call__(self, x: Array, mask: Array) -> Array:
        """The set form, :meth:`log_marginals`."""
        return self.log_marginals(x, mask)


class FunctionOracle(AnyOrderOracle):
    """A plain function ``log_marginals(x, mask) -> [n, q]`` as an oracle of the set form.

    :param log_marginals: the JAX-traceable function.
    :param num_positions: :math:`n`.
    :param num_categories: :math:`q`.

    >>> import jax.numpy as jnp
    >>> def uniform(x, mask):
    ...     return jnp.full((3, 2), jnp.log(0.5))
    >>> oracle = FunctionOracle(uniform, num_positions=3, num_categories=2)
    >>> oracle
    FunctionOracle(uniform, num_positions=3, num_categories=2)
    >>> oracle(jnp.zeros(3, jnp.int32), jnp.zeros(3, bool)).shape
    (3, 2)
    """

    def __init__(
        self,
        log_marginals: Callable[[Array, Array], Array],
        num_positions: int,
        num_categories: int,
    ) -> None:
        self.function = log_marginals
        self.num_positions = int(num_positions)
        self.num_categories = int(num_categories)

    def __repr__(self) -> str:
        name = getattr(self.function, "__qualname__", type(self.function).__name__)
        return (
            f"FunctionOracle({name}, num_positions={self.num_positions}, "
            f"num_categories={self.num_categories})"
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FunctionOracle)
            and other.function is self.function
            and (other.num_positions, other.num_categories)
            == (self.num_positions, self.num_categories)
        )

    def __hash__(self) -> int:
        return hash((FunctionOracle, id(self.function), self.num_positions, self.num_categories))

    def log_marginals(self, x: Array, mask: Array) -> Array:
        return self.function(x, mask)


def as_oracle(
    oracle: AnyOrderOracle | Callable[[Array, Array], Array],
    num_positions: int,
    num_categories: int,
) -> AnyOrderOracle:
    """``oracle`` itself if it is an :class:`AnyOrderOracle`, else the plain function
    ``(x, mask) -> [n, q]`` wrapped in a :class:`FunctionOracle`.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> oracle = CurieWeissOracle(3, beta=0.5)
    >>> as_oracle(oracle, 3, 2) is oracle
    True
    >>> as_oracle(lambda x, mask: jnp.full((3, 2), jnp.log(0.5)), 3, 2)
    FunctionOracle(<lambda>, num_positions=3, num_categories=2)
    """
    _warn_undeclared_block_form(oracle)
    if isinstance(oracle, AnyOrderOracle):
        return oracle
    return FunctionOracle(oracle, num_positions, num_categories)


def _warn_undeclared_block_form(oracle) -> None:
    """Warn when ``oracle`` has a ``log_conditionals`` the samplers will not use (not an
    :class:`AnyOrderOracle`, or no ``scores_blocks = True``), or a ``log_prob`` that is not
    :meth:`AnyOrderOracle.log_prob`."""
    if not isinstance(oracle, AnyOrderOracle) and callable(getattr(type(oracle), "log_prob", None)):
        warnings.warn(
            f"{type(oracle).__name__} defines log_prob but is not an AnyOrderOracle: its exact "
            "joint is not used (AnyOrderAR.log_prob, AutospecGibbs); subclass "
            "numpyro_autospec.oracles.AnyOrderOracle to declare it",
            UserWarning,
            stacklevel=3,
        )
    method = getattr(type(oracle), "log_conditionals", None)
    if method is None:
        return
    if isinstance(oracle, AnyOrderOracle):
        if oracle.scores_blocks or oracle.depends_on_order:
            return
        if method is AnyOrderOracle.log_conditionals:
            return
        why = "overrides log_conditionals but does not declare scores_blocks = True"
    else:
        why = "defines log_conditionals but is not an AnyOrderOracle"
    warnings.warn(
        f"{type(oracle).__name__} {why}: its block form is not used, and every scored step "
        "is a set-form evaluation; subclass numpyro_autospec.oracles.AnyOrderOracle and set "
        "scores_blocks = True to use it (docs/bring_your_own_network.md)",
        UserWarning,
        stacklevel=3,
    )
