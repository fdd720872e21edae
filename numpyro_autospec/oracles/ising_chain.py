"""A 1-D Ising chain with exact any-order conditionals by transfer matrices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

__all__ = ["IsingChainOracle"]

_SPINS = jnp.array([-1.0, 1.0])


class IsingChainOracle:
    """The chain :math:`\\mu(s) \\propto \\exp(\\sum_i J_i s_i s_{i+1} + \\sum_i h_i s_i)`,
    spins :math:`s_i = 2x_i - 1`.

    Conditionals given pinned sites come from forward-backward (transfer matrices) in log
    space with the pinned sites clamped:
    :math:`\\alpha_{i+1}(s') = \\log\\sum_s e^{\\alpha_i(s) + J_i s s'}
    + h_{i+1}s' + c_{i+1}(s')`,
    :math:`\\beta_i(s) = \\log\\sum_{s'} e^{J_i s s' + h_{i+1} s' + c_{i+1}(s')
    + \\beta_{i+1}(s')}`,
    :math:`\\mu(s_i \\mid x_S) \\propto e^{\\alpha_i(s_i) + \\beta_i(s_i)}`, with
    :math:`c_i(s) = -\\infty` off the pinned value.  :math:`O(n)` per query.

    >>> import jax.numpy as jnp
    >>> oracle = IsingChainOracle.uniform(5, coupling=0.5)
    >>> oracle(jnp.zeros(5, jnp.int32), jnp.zeros(5, bool)).shape
    (5, 2)
    """

    num_categories = 2

    def __init__(self, couplings, fields) -> None:
        couplings = np.asarray(couplings, np.float32)
        fields = np.asarray(fields, np.float32)
        if fields.ndim != 1 or couplings.shape != (max(fields.shape[0] - 1, 0),):
            raise ValueError(
                f"need fields of shape (n,) and couplings of shape (n-1,), got {fields.shape} "
                f"and {couplings.shape}"
            )
        self.num_positions = fields.shape[0]
        self.couplings = couplings
        self.fields = fields

    @classmethod
    def uniform(cls, num_positions: int, coupling: float, field: float = 0.0):
        return cls(np.full(num_positions - 1, coupling), np.full(num_positions, field))

    def _messages(self, clamp: Array):
        """Forward and backward log-messages ``[n, 2]`` given clamp log-potentials."""
        unary = self.fields[:, None] * _SPINS[None, :] + clamp
        pair = (
            jnp.asarray(self.couplings)[:, None, None]
            * _SPINS[None, :, None]
            * _SPINS[None, None, :]
        )

        def forward(alpha, inputs):
            pair_i, unary_next = inputs
            alpha = jax.nn.logsumexp(alpha[:, None] + pair_i, axis=0) + unary_next
            return alpha, alpha

        _, alphas = jax.lax.scan(forward, unary[0], (pair, unary[1:]))
        alphas = jnp.concatenate([unary[:1], alphas])

        def backward(beta, inputs):
            pair_i, unary_next = inputs
            beta = jax.nn.logsumexp(pair_i + (unary_next + beta)[None, :], axis=1)
            return beta, beta

        _, betas = jax.lax.scan(backward, jnp.zeros(2), (pair, unary[1:]), reverse=True)
        betas = jnp.concatenate([betas, jnp.zeros((1, 2))])
        return alphas, betas, pair, unary

    def __call__(self, x: Array, mask: Array) -> Array:
        clamp = jnp.where(mask[:, None] & (x[:, None] != jnp.arange(2)[None, :]), -jnp.inf, 0.0)
        alphas, betas, _, _ = self._messages(clamp)
        marginals = alphas + betas
        return marginals - jax.nn.logsumexp(marginals, axis=-1, keepdims=True)

    def log_partition(self) -> Array:
        alphas, _, _, _ = self._messages(jnp.zeros((self.num_positions, 2)))
        return jax.nn.logsumexp(alphas[-1])

    def log_prob(self, x: Array) -> Array:
        spins = 2.0 * jnp.asarray(x, jnp.float32) - 1.0
        energy = jnp.sum(self.fields * spins, axis=-1) + jnp.sum(
            self.couplings * spins[..., :-1] * spins[..., 1:], axis=-1
        )
        return energy - self.log_partition()

    def site_marginals(self) -> np.ndarray:
        """Exact unconditional :math:`P(x_i = v)`, shape ``[n, 2]``."""
        n = self.num_positions
        return np.exp(np.asarray(self(jnp.zeros(n, jnp.int32), jnp.zeros(n, bool)), np.float64))

    def bond_expectations(self) -> np.ndarray:
        """Exact unconditional :math:`E[s_i s_{i+1}]`, shape ``[n-1]``."""
        alphas, betas, pair, unary = self._messages(jnp.zeros((self.num_positions, 2)))
        joint = alphas[:-1, :, None] + pair + (unary[1:] + betas[1:])[:, None, :]
        joint = joint - jax.nn.logsumexp(joint, axis=(1, 2), keepdims=True)
        products = _SPINS[:, None] * _SPINS[None, :]
        return np.asarray(jnp.sum(jnp.exp(joint) * products, axis=(1, 2)), np.float64)
