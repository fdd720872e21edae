r"""The scikit-learn 8x8 handwritten digits as an exact point-cloud denoiser.

:math:`Y` is uniform over the 1797 images of :func:`sklearn.datasets.load_digits` (no download;
the ``digits`` extra), flattened to :math:`d = 64`: a high-dimensional, multimodal target of the
diffusion sampler of Anari et al. (arXiv:2511.07869) whose law is known exactly; a sample maps
back to its image with :meth:`~numpyro_autospec.denoisers.PointCloudDenoiser.nearest`.
"""

import functools

import jax.numpy as jnp
import numpy as np

from numpyro_autospec._core.parameters import is_traced
from numpyro_autospec.denoisers._point_cloud import PointCloudDenoiser

__all__ = ["DIGITS_MAX_PIXEL_VALUE", "digits_point_cloud"]

DIGITS_MAX_PIXEL_VALUE = 16.0
"""Pixel values of the raw digits are integers in [0, 16]."""


@functools.cache
def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:
        raise ImportError(
            "digits_point_cloud needs scikit-learn, which ships the digits data set: "
            "pip install 'numpyro-autospec[digits]' (or pip install scikit-learn)"
        ) from error
    dataset = load_digits()
    images = np.asarray(dataset.data, dtype=np.float64)
    labels = np.asarray(dataset.target, dtype=np.int32)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def digits_point_cloud(scale: bool = True) -> PointCloudDenoiser:
    r"""Exact denoiser of :math:`Y` uniform over the 1797 scikit-learn 8x8 digit images.

    :param scale: divide the pixel values (integers 0..16) by 16 (a bool, may be traced).
    :return: a :class:`~numpyro_autospec.denoisers.PointCloudDenoiser` with ``points`` of shape
        ``(1797, 64)`` and ``labels``, the int32 digit class of each point.
    :raises ImportError: if scikit-learn (the ``digits`` extra) is not installed.

    >>> denoiser = digits_point_cloud()
    >>> denoiser.points.shape, denoiser.dim, int(denoiser.labels[0])
    ((1797, 64), 64, 0)
    >>> float(denoiser.points.max())
    1.0
    """
    images, labels = _load_digits()
    if is_traced(scale):
        images = jnp.where(scale, images / DIGITS_MAX_PIXEL_VALUE, images)
    elif scale:
        images = images / DIGITS_MAX_PIXEL_VALUE
    return PointCloudDenoiser(images, labels=labels)
