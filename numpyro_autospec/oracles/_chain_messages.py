r"""Forward-backward on a chain of binary spins: log space, and linear space where it is exact.

The Ising chain's set form (:func:`numpyro_autospec.oracles._ising_chain.ising_chain_log_marginals`)
is one forward-backward pass of :math:`n - 1` sequential steps.  In log space every step takes
a log-sum-exp per entry; in linear space a step is a few products and one division, several
times faster on a CPU, where a speculation round of the engine runs the pass on every lane.
Linear space is used when it provably loses nothing, else log space
(:func:`chain_log_marginals`).

**Why linear space is exact below the bound.**  With each factor divided by its largest entry,
the pair factors are :math:`p_i(s, s') = e^{J_i s s' - |J_i|} \ge e^{-2|J_i|}` and the unary
factors :math:`u_i(s) = e^{h_i s - |h_i|} \ge e^{-2|h_i|}` (or 0 off a pinned value).  After
each step's normalization the forward message of an allowed value is at least
:math:`e^{-2|J| - 2|h|} / 2` and the backward message at least :math:`e^{-2|J|} / 4`, so every
allowed marginal is at least :math:`e^{-4|J| - 2|h|} / 8` (:math:`|J|, |h|` the largest
magnitudes): with :math:`4 |J| + 2 |h| \le 64` (:data:`LINEAR_SPACE_BOUND`) nothing comes
near float32's smallest normal number (:math:`1.2 \cdot 10^{-38}`), and the rows equal the
log-space rows to float32 rounding.  Beyond it (couplings of 16 and more), a
pinned pair against a strong coupling could underflow to a 0/0 row, so log space answers
there.  The choice is a :func:`jax.lax.cond` on the parameters, which stay unbatched when the
engine batches queries, so only one pass runs.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = [
    "Messages",
    "log_messages",
    "log_space_marginals",
    "linear_space_marginals",
    "chain_log_marginals",
]

SPINS = np.array([-1.0, 1.0], np.float32)
SPIN_PRODUCTS = np.outer(SPINS, SPINS)[None, :, :]  # [1, 2, 2], s * s'

#: linear space when :math:`4 \max|J_i| + 2 \max|h_i|` is at most this (module docstring)
LINEAR_SPACE_BOUND = 64.0


class Messages(NamedTuple):
    """Normalized log-messages of one forward-backward pass, all float32."""

    forward: Array  # [n, 2], forward[i] ∝ log sum over s_{<i} of the weight up to site i
    backward: Array  # [n, 2], backward[i] ∝ log sum over s_{>i} of the weight after site i
    unary: Array  # [n, 2], fields plus clamps
    pair: Array  # [n - 1, 2, 2], J_i s s'
    log_partition: Array  # scalar, log of the total (clamped) weight

    def log_marginals(self) -> Array:
        """``[n, 2]`` log marginals of the (clamped) chain: forward plus backward, normalized."""
        marginals = self.forward + self.backward
        return marginals - jax.nn.logsumexp(marginals, axis=-1, keepdims=True)


def log_messages(couplings: Array, fields: Array, clamp: Array) -> Messages:
    """Forward-backward in log space given clamp log-potentials ``clamp: [n, 2]`` (0 or
    -inf)."""
    unary = jnp.asarray(fields)[:, None] * SPINS[None, :] + clamp
    pair = jnp.asarray(couplings)[:, None, None] * SPIN_PRODUCTS

    def forward_step(alpha: Array, inputs: tuple[Array, Array]):
        pair_i, unary_next = inputs
        alpha = jax.nn.logsumexp(alpha[:, None] + pair_i, axis=0) + unary_next
        normalizer = jax.nn.logsumexp(alpha)
        return alpha - normalizer, (alpha - normalizer, normalizer)

    first_normalizer = jax.nn.logsumexp(unary[0])
    alpha_first = unary[0] - first_normalizer
    _, (alphas, normalizers) = jax.lax.scan(forward_step, alpha_first, (pair, unary[1:]))
    forward = jnp.concatenate([alpha_first[None, :], alphas])

    def backward_step(beta: Array, inputs: tuple[Array, Array]) -> tuple[Array, Array]:
        pair_i, unary_next = inputs
        beta = jax.nn.logsumexp(pair_i + (unary_next + beta)[None, :], axis=1)
        beta = beta - jax.nn.logsumexp(beta)
        return beta, beta

    last = jnp.zeros(2, jnp.float32)
    _, betas = jax.lax.scan(backward_step, last, (pair, unary[1:]), reverse=True)
    backward = jnp.concatenate([betas, last[None, :]])
    log_partition = first_normalizer + jnp.sum(normalizers)
    return Messages(forward, backward, unary, pair, log_partition)


def _off_value(x: Array, mask: Array) -> Array:
    """``[n, 2]``: true for the value a pinned site does not take."""
    x, mask = jnp.asarray(x), jnp.asarray(mask, bool)
    return mask[:, None] & (x[:, None] != jnp.arange(2)[None, :])


def log_space_marginals(couplings: Array, fields: Array, x: Array, mask: Array) -> Array:
    """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask`` by forward-backward in log
    space (:func:`log_messages`, pinned values clamped at -inf): any finite parameters."""
    clamp = jnp.where(_off_value(x, mask), -jnp.inf, 0.0)
    return log_messages(couplings, fields, clamp).log_marginals()


def linear_space_marginals(couplings: Array, fields: Array, x: Array, mask: Array) -> Array:
    """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask`` by forward-backward in
    linear space; exact only within :data:`LINEAR_SPACE_BOUND` (module docstring).  The steps
    are written entry by entry (two values), which XLA runs on all the lanes of a batched
    query at once."""
    allowed = jnp.where(_off_value(x, mask), 0.0, 1.0)
    unary_log = jnp.asarray(fields)[:, None] * SPINS[None, :]
    unary = jnp.exp(unary_log - jnp.max(unary_log, axis=1, keepdims=True)) * allowed
    pair_log = jnp.asarray(couplings)[:, None, None] * SPIN_PRODUCTS
    pair = jnp.exp(pair_log - jnp.max(pair_log, axis=(1, 2), keepdims=True))

    def forward_step(alpha: Array, inputs: tuple[Array, Array]) -> tuple[Array, Array]:
        pair_i, unary_next = inputs
        alpha = (alpha[0] * pair_i[0] + alpha[1] * pair_i[1]) * unary_next
        alpha = alpha / (alpha[0] + alpha[1])
        return alpha, alpha

    def backward_step(beta: Array, inputs: tuple[Array, Array]) -> tuple[Array, Array]:
        pair_i, unary_next = inputs
        weight = unary_next * beta
        beta = pair_i[:, 0] * weight[0] + pair_i[:, 1] * weight[1]
        beta = beta / (beta[0] + beta[1])
        return beta, beta

    first = unary[0] / (unary[0, 0] + unary[0, 1])
    _, alphas = jax.lax.scan(forward_step, first, (pair, unary[1:]))
    last = jnp.full(2, 0.5, jnp.float32)
    _, betas = jax.lax.scan(backward_step, last, (pair, unary[1:]), reverse=True)
    marginals = jnp.concatenate([first[None], alphas]) * jnp.concatenate([betas, last[None]])
    return jnp.log(marginals) - jnp.log(marginals[:, :1] + marginals[:, 1:])


def chain_log_marginals(couplings: Array, fields: Array, x: Array, mask: Array) -> Array:
    """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask``: linear space within
    :data:`LINEAR_SPACE_BOUND`, log space beyond it (or for non-finite parameters).

    A free site between two pinned sites of opposite spins takes either value with
    probability 1/2, for a weak coupling (linear space) as for a strong one (log space, where
    linear space would divide 0 by 0):

    >>> import jax.numpy as jnp, numpy as np
    >>> x, mask = jnp.array([1, 0, 0]), jnp.array([True, False, True])
    >>> for coupling in (0.5, 50.0):
    ...     rows = chain_log_marginals(jnp.full(2, coupling), jnp.zeros(3), x, mask)
    ...     print(np.exp(np.asarray(rows[1], float)).round(3).tolist())
    [0.5, 0.5]
    [0.5, 0.5]
    """
    couplings = jnp.asarray(couplings, jnp.float32)
    fields = jnp.asarray(fields, jnp.float32)
    size = 4.0 * jnp.max(jnp.abs(couplings), initial=0.0) + 2.0 * jnp.max(jnp.abs(fields))
    return jax.lax.cond(
        size <= LINEAR_SPACE_BOUND,
        linear_space_marginals,
        log_space_marginals,
        couplings,
        fields,
        x,
        mask,
    )
