r"""NumPyro distributions that carry an oracle, which ``AutospecKernel`` draws with the
autospeculation engine (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869,
2025) in :math:`\tilde O(\sqrt n)` rounds instead of :math:`n`: :class:`AnyOrderAR`
(docs/algorithm.md, section 2a); ``StochasticLocalization`` has its own module (section 2b).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from numpyro.distributions import Distribution, constraints

from numpyro_autospec.engine._sequential import sequential_run
from numpyro_autospec.errors import InputError, positive_integer
from numpyro_autospec.oracles._base import AnyOrderOracle, as_oracle
from numpyro_autospec.oracles._consistency import check_block_form_signature
from numpyro_autospec.oracles._probes import validate_log_conditionals, validate_oracle
from numpyro_autospec.oracles._validation import check_oracle_signature, check_permutation
from numpyro_autospec.processes._any_order import AnyOrderProcess

__all__ = ["AnyOrderAR", "OracleDistribution"]


def _is_array_pytree(value) -> bool:
    """Whether ``value`` is a pytree of arrays or numbers (else a distribution keeps it static)."""
    leaves = jax.tree.leaves(value)
    return bool(leaves) and all(
        isinstance(leaf, jax.Array | np.ndarray | np.generic | float | int) for leaf in leaves
    )


def parameters_probe(value, call: Callable[[], Array]) -> Array:
    """A scalar from every parameter of ``value``: the sum of its array leaves, else ``call()``."""
    if _is_array_pytree(value):
        leaves = [jnp.ravel(jnp.asarray(leaf, jnp.float32)) for leaf in jax.tree.leaves(value)]
        return jnp.sum(jnp.concatenate(leaves))
    return call()


def _oracle_label(oracle) -> str:
    """A short name of an oracle for messages: its class, or a function's name."""
    if isinstance(oracle, AnyOrderOracle):
        return type(oracle).__name__
    return getattr(oracle, "__qualname__", None) or type(oracle).__name__


class OracleDistribution(Distribution):
    """A distribution whose sampler is an oracle-driven process.

    Subclasses implement :meth:`make_process`; ``sample`` runs its sequential sampler (``N``
    oracle calls), :class:`~numpyro_autospec.infer.AutospecKernel` the autospeculation engine
    (same law, far fewer rounds).  Batch shape is ``()``: use a plate or ``sample_shape``.

    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> d = AnyOrderAR(CurieWeissOracle(4, beta=0.5), num_positions=4, num_categories=2)
    >>> isinstance(d, OracleDistribution), d.batch_shape, d.event_shape
    (True, (), (4,))
    >>> float(jax.jit(lambda d: 2 * d.oracle.beta)(d))  # beta is data: traced inside jit
    1.0
    """

    pytree_data_fields = ()
    pytree_aux_fields = ()
    #: oracle fields (in data and aux fields): data if a pytree of arrays, else static
    pytree_oracle_fields: tuple[str, ...] = ()

    def tree_flatten(self):
        data, aux = super().tree_flatten()
        data, aux = list(data), list(aux)
        data_names = type(self).gather_pytree_data_fields()
        aux_names = type(self).gather_pytree_aux_fields()
        for field in self.pytree_oracle_fields:
            if _is_array_pytree(getattr(self, field)):
                aux[aux_names.index(field)] = None
            else:
                data[data_names.index(field)] = None
        return tuple(data), tuple(aux)

    @classmethod
    def tree_unflatten(cls, aux_data, params):
        distribution = super().tree_unflatten(aux_data, params)
        data_names = cls.gather_pytree_data_fields()
        aux_names = cls.gather_pytree_aux_fields()
        for field in cls.pytree_oracle_fields:
            value = aux_data[aux_names.index(field)]
            if value is None:
                value = params[data_names.index(field)]
            setattr(distribution, field, value)
        return distribution

    def make_process(self, name: str):
        """The :class:`~numpyro_autospec.processes.Process` whose output is one draw.

        :param name: the site name, quoted in error messages.
        """
        raise NotImplementedError

    def validate_oracle(self, name: str) -> None:
        """Eagerly probe the oracle against its contract; raises an error naming the site."""

    def dependency_probe(self) -> Array:
        """An array computed from every parameter (finds the latent sites this site depends on)."""
        raise NotImplementedError

    def _label(self) -> str:
        return type(self).__name__

    def sample(self, key: Array, sample_shape: tuple[int, ...] = ()) -> Array:
        """Exact draws with the sequential sampler (``key`` itself for a single draw,
        ``jax.random.split(key, D)`` for ``D`` draws)."""
        sample_shape = tuple(int(s) for s in sample_shape)
        num_draws = math.prod(sample_shape)
        process = self.make_process(self._label())
        keys = key[None] if num_draws == 1 else jax.random.split(key, max(num_draws, 1))
        values = sequential_run(process, keys).value
        if num_draws == 0:
            values = values[:0]
        return jnp.reshape(values, sample_shape + self.event_shape)


class AnyOrderAR(OracleDistribution):
    r"""A law on :math:`[q]^n` defined by an any-order oracle, optionally with observed entries.

    The oracle is any JAX-traceable ``log_marginals(x: int32[n], mask: bool[n]) -> float[n, q]``
    whose row :math:`i` is :math:`\log \mu(X_i = \cdot \mid X_{\text{mask}} =
    x_{\text{mask}})` (:mod:`numpyro_autospec.oracles`).  A draw fixes the free sites one at a
    time in a uniformly random order (or in ``order``), each from its conditional, so its law
    is :math:`\mathbb{E}_\sigma \prod_{k} \mu(x_{\sigma(k)} \mid x_{\sigma(<k)})`
    (:math:`\mu` itself for a consistent oracle).

    **Infilling.**  ``observed`` and ``observed_mask`` pin entries: the law is then
    :math:`\mu(x_{\text{free}} \mid x_{\text{obs}})`; draws return the full vector.

    **Densities.**  ``log_prob`` is exact with a fixed ``order``
    (:math:`\sum_k \log \mu(x_{\sigma(k)} \mid x_{\sigma(<k)})`, any oracle), or for an oracle
    with an exact joint ``log_prob`` (``TableOracle``, ``CurieWeissOracle``,
    ``IsingChainOracle``), divided by the marginal of the observed entries; otherwise it raises
    :class:`NotImplementedError` (a random order averages over :math:`n!` orders).

    :param oracle: the any-order oracle; its parameters may be traced.
    :param num_positions: :math:`n`; by default the oracle's own (a plain function needs it).
    :param num_categories: :math:`q`; by default the oracle's own.
    :param observed: ``int[n]`` values, read where ``observed_mask`` is set (may be traced).
    :param observed_mask: concrete ``bool[n]``, the observed entries.
    :param order: a concrete permutation of ``range(n)`` to fix the free sites in.
    :param validate_args: NumPyro's flag.

    >>> import jax, numpy as np
    >>> from numpyro_autospec.oracles import TableOracle
    >>> oracle = TableOracle(np.log([[0.4, 0.1], [0.2, 0.3]]))
    >>> d = AnyOrderAR(oracle)  # n = 2 sites, q = 2 values: the oracle's sizes
    >>> d.sample(jax.random.PRNGKey(0), (3,)).shape
    (3, 2)
    >>> round(float(np.exp(d.log_prob(np.array([0, 1])))), 3)
    0.1
    >>> infill = AnyOrderAR(oracle, observed=np.array([1, 0]),
    ...                     observed_mask=np.array([True, False]))
    >>> round(float(np.exp(infill.log_prob(np.array([1, 1])))), 3)  # mu(x_1 = 1 | x_0 = 1)
    0.6
    >>> round(float(np.exp(infill.joint_log_prob(np.array([1, 1])))), 3)  # mu(1, 1)
    0.3
    """

    pytree_data_fields = ("observed", "oracle")
    pytree_oracle_fields = ("oracle",)
    pytree_aux_fields = (
        "oracle",
        "num_positions",
        "num_categories",
        "_observed_mask_key",
        "_order_key",
    )

    def __init__(
        self,
        oracle,
        num_positions: int | None = None,
        num_categories: int | None = None,
        observed=None,
        observed_mask=None,
        order=None,
        validate_args=None,
    ):
        sizes = {"num_positions": num_positions, "num_categories": num_categories}
        for label, value in sizes.items():
            declared = getattr(oracle, label, None) if isinstance(oracle, AnyOrderOracle) else None
            if value is None:
                if declared is None:
                    raise InputError(
                        f"AnyOrderAR: {label} not given, and oracle {_oracle_label(oracle)} "
                        "declares none (only an AnyOrderOracle declares its sizes; pass "
                        f"{label}=... for a plain function)"
                    )
                sizes[label] = declared
            elif declared is not None and int(declared) != value:
                raise InputError(
                    f"AnyOrderAR: {label}={value} but the oracle has {label}={declared}"
                )
        n = positive_integer(sizes["num_positions"], "num_positions")
        q = positive_integer(sizes["num_categories"], "num_categories")
        if isinstance(oracle, AnyOrderOracle) and oracle.depends_on_order:
            check_block_form_signature(oracle, name=f"oracle {_oracle_label(oracle)}")
        else:
            check_oracle_signature(oracle, n, q, name=f"oracle {_oracle_label(oracle)}")
        if observed_mask is None:
            if observed is not None:
                raise InputError(
                    "AnyOrderAR: observed given without observed_mask (to observe every entry, "
                    "use numpyro.sample(name, AnyOrderAR(...), obs=values))"
                )
            mask_key = None
        else:
            if isinstance(observed_mask, jax.core.Tracer):
                raise InputError(
                    "AnyOrderAR: observed_mask must be concrete, not traced (the number of "
                    "sampled entries is a static shape)"
                )
            mask = np.asarray(observed_mask)
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise InputError(
                    f"AnyOrderAR: observed_mask must be a bool array of shape ({n},), got "
                    f"{mask.dtype}{list(mask.shape)}"
                )
            if observed is None:
                raise InputError("AnyOrderAR: observed_mask given without observed")
            if jnp.shape(observed) != (n,):
                raise InputError(
                    f"AnyOrderAR: observed must have shape ({n},), got {jnp.shape(observed)}"
                )
            if not jnp.issubdtype(jnp.result_type(observed), jnp.integer):
                raise InputError(
                    f"AnyOrderAR: observed must have an integer dtype, got "
                    f"{jnp.result_type(observed)}"
                )
            mask_key = tuple(bool(b) for b in mask)
        if order is not None:
            check_permutation(order, n, name="order")
            order = tuple(int(i) for i in np.asarray(order))
        self.oracle = oracle
        self.num_positions = n
        self.num_categories = q
        self.observed = None if observed is None else jnp.asarray(observed)
        self._observed_mask_key = mask_key
        self._order_key = order
        super().__init__(batch_shape=(), event_shape=(n,), validate_args=validate_args)

    @property
    def observed_mask(self) -> np.ndarray | None:
        """The concrete ``bool[n]`` observed mask, or ``None``."""
        key = self._observed_mask_key
        return None if key is None else np.array(key, dtype=bool)

    @property
    def order(self) -> np.ndarray | None:
        """The fixed order, or ``None`` for a uniformly random one."""
        return None if self._order_key is None else np.array(self._order_key, np.int32)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.num_categories - 1), 1)

    def make_process(self, name: str) -> AnyOrderProcess:
        """The :class:`~numpyro_autospec.processes.AnyOrderProcess` of this distribution (raises
        :class:`~numpyro_autospec.errors.InputError` for observed values outside :math:`[0, q)`)."""
        return AnyOrderProcess(
            self.oracle,
            self.num_positions,
            self.num_categories,
            observed_values=self.observed,
            observed_mask=self.observed_mask,
            order=self.order,
            name=name,
        )

    def validate_oracle(self, name: str) -> None:
        oracle = as_oracle(self.oracle, self.num_positions, self.num_categories)
        if oracle.depends_on_order:
            validate_log_conditionals(
                oracle,
                self.num_positions,
                name=f"oracle of site {name!r} ({_oracle_label(self.oracle)}.log_conditionals)",
            )
            return
        validate_oracle(
            self.oracle, self.num_positions, self.num_categories, name=f"oracle of site {name!r}"
        )

    def dependency_probe(self) -> Array:
        n = self.num_positions

        def call() -> Array:
            steps = jnp.arange(n, dtype=jnp.int32)
            oracle = as_oracle(self.oracle, n, self.num_categories)
            answer = oracle.log_conditionals(jnp.zeros(n, jnp.int32), steps, steps, steps)
            return jnp.sum(jnp.where(jnp.isfinite(answer), answer, 0.0))

        probe = parameters_probe(self.oracle, call)
        if self.observed is not None:
            probe = probe + jnp.sum(self.observed)
        return probe

    def _chain_rule(self, values: Array, sites: np.ndarray, pinned: np.ndarray) -> Array:
        r""":math:`\sum_j \log \text{oracle}(x, \text{pinned} \cup \{s_{<j}\})[s_j, x_{s_j}]`
        for one configuration ``values: int[n]`` (one batched oracle call)."""
        n = self.num_positions
        if sites.size == 0:
            return jnp.zeros((), jnp.float32)
        # pinned sites first, then ``sites``: row j given the first P + j
        order = np.concatenate([np.flatnonzero(pinned), sites]).astype(np.int32)
        ranks = np.full(n, n, np.int32)
        ranks[order] = np.arange(order.size, dtype=np.int32)
        prefix = int(pinned.sum()) + np.arange(sites.size, dtype=np.int32)
        oracle = as_oracle(self.oracle, n, self.num_categories)
        rows = oracle.log_conditionals(
            values, jnp.asarray(ranks), jnp.asarray(sites, jnp.int32), jnp.asarray(prefix)
        )
        picked = rows[jnp.arange(sites.size), values[jnp.asarray(sites)]]
        return jnp.sum(picked)

    @property
    def has_joint_log_prob(self) -> bool:
        """Whether the oracle overrides :meth:`AnyOrderOracle.log_prob` with an exact joint
        (:meth:`joint_log_prob` needs it)."""
        oracle = self.oracle
        return isinstance(oracle, AnyOrderOracle) and (
            type(oracle).log_prob is not AnyOrderOracle.log_prob
        )

    def joint_log_prob(self, value: Array) -> Array:
        r"""The joint :math:`\log \mu(x) = \log \mu(x_{\text{free}} \mid x_{\text{obs}}) +
        \log \mu(x_{\text{obs}})` of the whole vector (``-inf`` where ``value`` disagrees with an
        observed entry): the density when the observed entries are *data* drawn from :math:`\mu`.

        :raises NotImplementedError: without :attr:`has_joint_log_prob`.
        """
        if not self.has_joint_log_prob:
            raise NotImplementedError(
                f"AnyOrderAR.joint_log_prob: oracle {_oracle_label(self.oracle)} has no exact "
                "joint log_prob"
            )
        value = jnp.asarray(value)
        clipped = jnp.clip(value, 0, self.num_categories - 1).astype(jnp.int32)
        log_density = jnp.asarray(self.oracle.log_prob(clipped))
        return jnp.where(self._in_support(value), log_density, -jnp.inf)

    def _in_support(self, value: Array) -> Array:
        """Whether each ``value[..., :]`` lies in :math:`[0, q)^n` and agrees with the observed."""
        mask = self.observed_mask
        inside = jnp.all((value >= 0) & (value < self.num_categories), axis=-1)
        if mask is not None:
            observed = jnp.broadcast_to(jnp.asarray(self.observed), jnp.shape(value))
            pinned_entries = jnp.broadcast_to(jnp.asarray(mask), jnp.shape(value))
            inside = inside & jnp.all(jnp.where(pinned_entries, value == observed, True), axis=-1)
        return inside

    def log_prob(self, value: Array) -> Array:
        value = jnp.asarray(value)
        n, q = self.num_positions, self.num_categories
        mask = self.observed_mask
        pinned = np.zeros(n, bool) if mask is None else mask
        clipped = jnp.clip(value, 0, q - 1).astype(jnp.int32)
        batch_shape = jnp.shape(value)[:-1]
        flat = jnp.reshape(clipped, (-1, n))
        if self.order is not None:
            free_in_order = np.array([i for i in self.order if not pinned[i]], np.int64)
            log_density = jax.vmap(lambda v: self._chain_rule(v, free_in_order, pinned))(flat)
        elif self.has_joint_log_prob:
            log_density = jnp.asarray(self.oracle.log_prob(flat))
            if mask is not None and mask.any():
                observed = jnp.clip(self.observed, 0, q - 1).astype(jnp.int32)
                log_marginal = self._chain_rule(observed, np.flatnonzero(mask), np.zeros(n, bool))
                log_density = log_density - log_marginal
        else:
            raise NotImplementedError(
                f"AnyOrderAR.log_prob: oracle {_oracle_label(self.oracle)} has no exact joint "
                "log_prob and no order was given (pass order=... for the exact density along "
                "one order; sampling does not need log_prob)"
            )
        log_density = jnp.reshape(log_density, batch_shape)
        return jnp.where(self._in_support(value), log_density, -jnp.inf)
