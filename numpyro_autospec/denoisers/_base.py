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

from typing import Any, ClassVar, Protocol, runtime_checkable

from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec.denoisers._validation import check_query_state, check_query_time

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


class ArrayDenoiser:
    """Shared plumbing of the closed-form denoisers (:class:`PointCloudDenoiser`,
    :class:`GaussianMixtureDenoiser`): the checks of one query, naming the class, and the
    pytree whose leaves are the attributes named by ``_leaves``, in that order.  A subclass
    registers itself with ``jax.tree_util.register_pytree_node_class`` and defines ``dim``.

    >>> import jax, jax.numpy as jnp
    >>> @jax.tree_util.register_pytree_node_class
    ... class Constant(ArrayDenoiser):
    ...     _leaves = ("value",)
    ...     dim = 2
    ...     def __init__(self, value):
    ...         self.value = value
    >>> jax.tree.leaves(Constant(jnp.ones(2))), Constant(0.0)._check_state([1.0, 2.0]).dtype
    ([Array([1., 1.], dtype=float32)], dtype('float32'))
    """

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
