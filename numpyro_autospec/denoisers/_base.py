r"""The denoiser interface used by the diffusion (stochastic localization) process.

A denoiser is the oracle of the denoising-diffusion setting of autospeculation (Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869):

.. math::

    f(t, y) = \mathbb{E}\left[Y \,\middle|\, tY + W_t = y\right],

with :math:`W` a standard Brownian motion in :math:`\mathbb{R}^d` independent of :math:`Y`,
i.e. :math:`y \sim \mathcal{N}(tY, tI)`.  At :math:`t = 0`, :math:`y = 0` and :math:`f(0, 0) =
\mathbb{E}[Y]`.
"""

from typing import Any, ClassVar, Protocol, runtime_checkable

from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.denoisers._validation import check_query_state, check_query_time

__all__ = ["Denoiser"]


@runtime_checkable
class Denoiser(Protocol):
    r"""Structural type of a denoiser: ``denoiser(t, y) -> E[Y | t Y + W_t = y]``.

    Any object with an integer attribute ``dim`` and a call ``(t, y) -> output``: ``t`` a
    float32 scalar :math:`\ge 0`, ``y`` and the output float32 of shape ``(dim,)``, traceable
    under :func:`jax.jit` and :func:`jax.vmap`.  Check one with
    :func:`~numpyro_autospec.denoisers.validate_denoiser`.

    >>> import jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import Denoiser, PointCloudDenoiser
    >>> denoiser = PointCloudDenoiser(jnp.eye(3))
    >>> isinstance(denoiser, Denoiser)
    True
    """

    dim: int

    def __call__(self, t: ArrayLike, y: ArrayLike) -> Array:
        r""":math:`\mathbb{E}[Y \mid tY + W_t = y]`, float32 of shape ``(dim,)``."""
        ...


class ArrayDenoiser:
    """Base of the closed-form denoisers: one query's checks and a pytree whose leaves are the
    attributes named by ``_leaves`` (subclasses register themselves and define ``dim``)."""

    _leaves: ClassVar[tuple[str, ...]] = ()
    dim: int

    def _check_state(self, y: ArrayLike) -> Array:
        return check_query_state(y, self.dim, owner=type(self).__name__)

    def _check_time(self, t: ArrayLike) -> Array:
        return check_query_time(t, owner=type(self).__name__)

    def _set_leaves(self, leaves: tuple[Any, ...]) -> None:
        for name, leaf in zip(self._leaves, leaves, strict=True):
            setattr(self, name, leaf)

    def tree_flatten(self) -> tuple[tuple[Any, ...], None]:
        return tuple(getattr(self, name) for name in self._leaves), None

    @classmethod
    def tree_unflatten(cls, auxiliary_data: None, children: tuple[Any, ...]) -> Any:
        denoiser = object.__new__(cls)
        denoiser._set_leaves(children)
        return denoiser
