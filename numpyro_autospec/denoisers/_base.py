r"""The denoiser interface used by the diffusion (stochastic localization) process.

A denoiser is the oracle of the denoising-diffusion setting of autospeculation [1]: the
conditional mean of a target random vector :math:`Y \in \mathbb{R}^d` given a noisy, scaled
observation of it,

.. math::

    f(t, y) = \mathbb{E}\left[Y \,\middle|\, tY + W_t = y\right],

where :math:`W` is a standard Brownian motion in :math:`\mathbb{R}^d` independent of
:math:`Y`. Equivalently the observation is :math:`y \sim \mathcal{N}(tY, tI)`, or
:math:`y / t = Y + g` with :math:`g \sim \mathcal{N}(0, I/t)`. At :math:`t = 0` the only
attainable observation is :math:`y = 0` and :math:`f(0, 0) = \mathbb{E}[Y]`.

**References**

1. *Parallel Sampling via Autospeculation*, N. Anari, C. Baronio, C. Chen, A. Haqi,
   F. Koehler, A. Li, T.-D. Vuong, arXiv:2511.07869 (2025).
"""

from typing import Protocol, runtime_checkable

from jax import Array
from jax.typing import ArrayLike

__all__ = ["Denoiser"]


@runtime_checkable
class Denoiser(Protocol):
    r"""Structural type of a denoiser: ``denoiser(t, y) -> E[Y | t Y + W_t = y]``.

    Any object with an integer attribute ``dim`` and a call ``(t, y) -> output`` satisfies it.
    The contract the rest of the package relies on:

    - ``t`` is a float32 scalar with :math:`t \ge 0`, ``y`` a float32 array of shape
      ``(dim,)``; the output is a float32 array of shape ``(dim,)``.
    - The call is traceable by JAX: it works under :func:`jax.jit` and under :func:`jax.vmap`
      over batches of ``(t, y)``, with static shapes and without implicit rank promotion.

    :func:`numpyro_autospec.denoisers.validate_denoiser` checks a candidate against this
    contract.

    **Example**

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import Denoiser, PointCloudDenoiser
    >>> denoiser = PointCloudDenoiser(jnp.eye(3))
    >>> isinstance(denoiser, Denoiser)
    True
    """

    dim: int

    def __call__(self, t: ArrayLike, y: ArrayLike) -> Array:
        r"""Return :math:`\mathbb{E}[Y \mid tY + W_t = y]` as a float32 array of shape (dim,)."""
        ...
