r"""The any-order oracle protocol: set form ``log_marginals`` and block form ``log_conditionals``.

An any-order oracle over :math:`n` sites with :math:`q` values each answers conditionals of a
distribution :math:`p` on :math:`[q]^n` (docs/algorithm.md, section 2a; Anari et al., "Parallel
Sampling via Autospeculation", arXiv:2511.07869).  It has two forms:

**Block form** (the primary primitive), for an order given by its inverse ``ranks``:

.. code-block:: text

    log_conditionals(x: int32[n], ranks: int32[n], sites: int32[L], prefix_lengths: int32[L])
        -> float[L, q]

row :math:`j` being :math:`\log p(X_{s_j} = \cdot \mid X_i = x_i \text{ for all } i \text{ with }
\text{ranks}[i] < \ell_j)`, :math:`s_j` = ``sites[j]`` and :math:`\ell_j` =
``prefix_lengths[j]``.  One call serves both uses of a block :math:`[a, a+m)` of the order
:math:`\sigma`: its **speculation** (``sites = sigma(a..a+m-1)``, every prefix length ``a``) and
its **scoring** (``prefix_lengths = a..a+m-1``: row :math:`j` given the first :math:`j` steps of
the block).  ``L`` is static; the samplers pad a block to a fixed ``L`` and ignore the padded
rows (whose sites and prefix lengths are still valid indices).

**Set form**, for oracles whose conditionals depend only on the pinned *set*:

.. code-block:: text

    log_marginals(x: int32[n], mask: bool[n]) -> float[n, q]

row :math:`i` being :math:`\log p(X_i = \cdot \mid X_S = x_S)`, :math:`S = \{i : \text{mask}_i\}`.
Exact models and masked (BERT-style, masked diffusion) networks are of this kind; the default
block form is derived from it, one ``log_marginals`` evaluation per distinct prefix.  An oracle
whose conditionals depend on the *order* of the prefix (a sigma-GPT / XLNet-style network)
implements the block form only; the samplers then draw from the law of sequential sampling along
the uniformly random order, :math:`\mathbb{E}_\sigma \prod_k p(x_{\sigma(k)} \mid
x_{\sigma(<k)})`.

The fast paths are *declared* as class attributes, never discovered:

- :attr:`AnyOrderOracle.scores_blocks`: ``log_conditionals`` computes all ``L`` rows in one
  evaluation (one forward pass, or a cumulative pass of an exact model).  The engine then scores
  a whole block with one call; otherwise with one ``log_marginals`` evaluation per step.
- :attr:`AnyOrderOracle.depends_on_order`: the conditionals depend on the order of the prefix;
  ``log_marginals`` is undefined.

The contract of the answers: rows of conditionals are log-probability vectors (logsumexp 0);
``-inf`` is the legal log-probability of an impossible value, ``NaN`` and ``+inf`` never are;
rows of ``log_marginals`` at pinned sites may hold anything but NaN.  Static shapes, no Python
control flow on traced values: the samplers ``vmap`` the oracle over batches of queries.
Plain functions ``(x, mask) -> [n, q]`` are oracles of the set form; :func:`as_oracle` wraps
them.  :mod:`numpyro_autospec.oracles._validation` checks an oracle against this contract.
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
    r"""The block form derived from the set form: row :math:`j` is row ``sites[j]`` of
    ``log_marginals(x, ranks < prefix_lengths[j])``, one evaluation per row.

    Two sites, the order visiting site 1 first (``ranks = [1, 0]``): row 0 is the marginal of
    :math:`X_1`, row 1 the law of :math:`X_0` given :math:`X_1 = 0`:

    >>> import numpy as np, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import TableOracle
    >>> oracle = TableOracle(np.log([[0.4, 0.1], [0.2, 0.3]]))  # p(x_0, x_1)
    >>> rows = marginal_conditionals(
    ...     oracle.log_marginals, jnp.array([1, 0]), ranks=jnp.array([1, 0]),
    ...     sites=jnp.array([1, 0]), prefix_lengths=jnp.array([0, 1]))
    >>> np.exp(np.asarray(rows, float)).round(3).tolist()
    [[0.6, 0.4], [0.667, 0.333]]
    """

    def row(site: Array, length: Array) -> Array:
        return log_marginals(x, ranks < length)[site]

    return jax.vmap(row)(jnp.asarray(sites, jnp.int32), jnp.asarray(prefix_lengths, jnp.int32))


def block_indices(ranks: Array, prefix_lengths: Array, num_positions: int) -> tuple[Array, Array]:
    """The block form's ``ranks`` as int32 and its ``prefix_lengths`` as int32 clipped to
    :math:`[0, n]`, as the one-pass block forms of the exact oracles read them.

    >>> import jax.numpy as jnp
    >>> ranks, lengths = block_indices(jnp.array([1, 0]), jnp.array([-1, 1, 5]), 2)
    >>> ranks.dtype, lengths.tolist()
    (dtype('int32'), [0, 1, 2])
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
    #: with ``scores_blocks``: the most rows one ``log_conditionals`` call should compute when
    #: each row costs about as much as a small call (an exact model's row is a sum over the
    #: free sites): the engine then splits a query of more rows into calls of this many, and
    #: pads no query beyond it.  ``None`` (a network whose forward pass costs about the same
    #: for any number of rows): one call per query
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
    """Warn when ``oracle`` has a block form of its own that the samplers will not use: a
    ``log_conditionals`` method on an object that is not an :class:`AnyOrderOracle`, or one
    overriding the derived default without ``scores_blocks = True`` (every scored step then
    costs a set-form evaluation: at Curie-Weiss n = 1024 about 1200 evaluations a draw
    instead of 7)."""
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
