r"""Forward-backward on a chain of binary spins: log space, and linear space where it is exact.

Linear space is several times faster on a CPU; :func:`chain_log_marginals` uses it when it
provably loses nothing: with each factor divided by its largest entry, every allowed marginal is
at least :math:`e^{-4|J| - 2|h|} / 8` (:math:`|J|, |h|` the largest magnitudes), so with
:math:`4 |J| + 2 |h| \le 64` (:data:`LINEAR_SPACE_BOUND`) nothing nears float32's smallest normal
number.  Beyond it a pinned pair against a strong coupling could underflow to a 0/0 row.
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

#: linear space when :math:`4 \max|J_i| + 2 \max|h_i|` is at most this
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
    """Forward-backward in log space given clamp log-potentials ``clamp: [n, 2]`` (0 or -inf)."""
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
    """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask``, in log space."""
    clamp = jnp.where(_off_value(x, mask), -jnp.inf, 0.0)
    return log_messages(couplings, fields, clamp).log_marginals()


def linear_space_marginals(couplings: Array, fields: Array, x: Array, mask: Array) -> Array:
    """Log conditional marginals ``[n, 2]`` given ``x`` on ``mask``, in linear space; exact only
    within :data:`LINEAR_SPACE_BOUND`."""
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
    :data:`LINEAR_SPACE_BOUND`, log space beyond it (or for non-finite parameters)."""
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
