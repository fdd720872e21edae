r"""The oracle shell of a learned any-order network.

A network answers :math:`\text{log\_marginals}(x, m)_{iv} = \log p_\theta(X_i = v \mid x_S)`,
:math:`S = \{i : m_i\}`, but the answers of different masks come from no single joint law, so
for an order :math:`\sigma` the sampler draws exactly from

.. math:: p_\sigma(x) = \prod_{k} p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)}),

and with a uniformly random order from its average over orders (section 2a of
docs/algorithm.md; Anari et al., arXiv:2511.07869).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.errors import InputError, positive_integer
from numpyro_autospec.oracles._base import AnyOrderOracle
from numpyro_autospec.oracles._validation import check_oracle_signature, check_order_and_observed

__all__ = ["LearnedOracle", "learned_log_marginals", "network_sizes"]

_MAX_CONFIGURATIONS = 1 << 16


def learned_log_marginals(network: Callable[[Array, Array], Array], x: Array, mask: Array) -> Array:
    """``network(x, mask)`` as float32 log-probabilities ``[n, q]``, renormalized per row."""
    answer = network(jnp.asarray(x, jnp.int32), jnp.asarray(mask, bool))
    return jax.nn.log_softmax(jnp.asarray(answer, jnp.float32), axis=-1)


# One compilation per architecture (the network is an argument), not op by op.
_jitted_log_marginals = eqx.filter_jit(learned_log_marginals)
_batched_log_marginals = eqx.filter_jit(jax.vmap(learned_log_marginals, in_axes=(None, 0, None)))


def network_sizes(network: object, owner: str) -> tuple[int, int]:
    """``(num_positions, num_categories)`` of a network, each a positive ``int`` (not ``bool``);
    ``InputError`` naming ``owner``, the attribute and its value otherwise."""
    sizes = []
    for label in ("num_positions", "num_categories"):
        value = getattr(network, label, None)
        attribute = f"{owner}: the network attribute {type(network).__name__}.{label}"
        sizes.append(positive_integer(value, attribute, InputError))
    return sizes[0], sizes[1]


@jax.tree_util.register_pytree_node_class
class LearnedOracle(AnyOrderOracle):
    r"""An :class:`~numpyro_autospec.oracles.AnyOrderOracle` backed by a trained network.

    ``oracle(x, mask)`` is ``network(x, mask)`` normalized per row with a log-softmax, so any
    network returning ``[n, q]`` logits is a valid oracle.  A pytree whose only child is the
    network (new weights, no recompilation); equality and hashing are by identity.

    :param network: a JAX-traceable callable ``(int32[n], bool[n]) -> float[n, q]`` with integer
        attributes ``num_positions`` and ``num_categories``, e.g. a (trained)
        :class:`~numpyro_autospec.learned.MaskedMLP`.
    :raises InputError: if the network lacks the sizes.
    :raises ~numpyro_autospec.errors.OracleError: if it cannot be traced on one query or
        returns the wrong shape (checked abstractly, no computation).

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from numpyro_autospec.learned import MaskedMLP
    >>> from numpyro_autospec.oracles import AnyOrderOracle, validate_oracle
    >>> oracle = LearnedOracle(MaskedMLP(3, 2, hidden_size=8, key=jax.random.PRNGKey(0)))
    >>> answer = oracle(jnp.zeros(3, jnp.int32), jnp.zeros(3, bool))
    >>> isinstance(oracle, AnyOrderOracle), answer.shape
    (True, (3, 2))
    >>> validate_oracle(oracle, 3, 2)
    >>> law = oracle.sequential_log_probs([2, 0, 1])  # p_sigma on all 8 configurations
    >>> law.shape, round(float(np.exp(law).sum()), 6)
    ((2, 2, 2), 1.0)
    """

    def __init__(self, network: Callable[[Array, Array], Array]) -> None:
        sizes = network_sizes(network, "LearnedOracle")
        check_oracle_signature(network, *sizes, name=f"LearnedOracle({type(network).__name__})")
        self.network = network
        self.num_positions: int = sizes[0]
        self.num_categories: int = sizes[1]

    def __repr__(self) -> str:
        return (
            f"LearnedOracle({type(self.network).__name__}, num_positions={self.num_positions}, "
            f"num_categories={self.num_categories})"
        )

    def log_marginals(self, x: Array, mask: Array) -> Array:
        """Log conditional marginals ``float32[n, q]`` given ``x`` on ``mask``."""
        return _jitted_log_marginals(self.network, x, mask)

    def tree_flatten(self):
        return (self.network,), (self.num_positions, self.num_categories)

    @classmethod
    def tree_unflatten(cls, aux, children) -> LearnedOracle:
        oracle = object.__new__(cls)  # children may be tracers or placeholders: no checks
        oracle.network = children[0]
        oracle.num_positions, oracle.num_categories = aux
        return oracle

    def configurations(self) -> np.ndarray:
        r"""All :math:`q^n \le 2^{16}` configurations, int32 ``[q^n, n]``, in C order."""
        n, q = self.num_positions, self.num_categories
        if q**n > _MAX_CONFIGURATIONS:
            raise InputError(
                f"LearnedOracle: enumerating q^n = {q}^{n} configurations is too many "
                f"(at most {_MAX_CONFIGURATIONS})"
            )
        return np.indices((q,) * n).reshape(n, -1).T.astype(np.int32)

    def sequential_log_probs(
        self,
        order: ArrayLike,
        values: ArrayLike | None = None,
        mask: ArrayLike | None = None,
    ) -> np.ndarray:
        r"""Exact law of sequential any-order sampling with the fixed ``order``, by enumeration.

        Observed sites (``mask``) come first, fixed to ``values``; the free sites follow in
        ``order``.  Entry :math:`y` is :math:`\sum_k \log p_\theta(y_{\sigma(k)} \mid
        y_{\sigma(<k)})` over the free steps (renormalized in float64), ``-inf`` off ``values``.

        :param order: a permutation of ``range(n)``.
        :param values: ``[n]`` observed values, read where ``mask`` is set.
        :param mask: ``[n]`` bool, the observed sites (default: none).
        :return: normalized log-probabilities, float64 numpy of shape ``(q,) * n``.
        """
        n, q = self.num_positions, self.num_categories
        order, values, mask = check_order_and_observed(order, values, mask, n, q)
        configurations = self.configurations()
        rows = np.arange(len(configurations))
        total = np.zeros(len(configurations))
        pinned = mask.copy()
        for site in order[~mask[order]]:
            answers = _batched_log_marginals(
                self.network, jnp.asarray(configurations), jnp.asarray(pinned)
            )
            answers = np.asarray(answers, np.float64)
            total += answers[rows, site, configurations[:, site]]
            pinned[site] = True
        observed = np.all((configurations == values[None, :]) | ~mask[None, :], axis=1)
        total = np.where(observed, total, -np.inf)
        finite = total[np.isfinite(total)]
        log_normalizer = np.logaddexp.reduce(finite) if finite.size else 0.0
        return (total - log_normalizer).reshape((q,) * n)

    @property
    def num_parameters(self) -> int:
        """Number of trainable scalars of the network (its inexact array leaves)."""
        leaves = jax.tree.leaves(eqx.filter(self.network, eqx.is_inexact_array))
        return sum(math.prod(leaf.shape) for leaf in leaves)
