"""Exact denoisers (oracles of the diffusion process) and checks of the denoiser contract."""

from numpyro_autospec.denoisers._base import Denoiser
from numpyro_autospec.denoisers._digits import digits_point_cloud
from numpyro_autospec.denoisers._gaussian_mixture import GaussianMixtureDenoiser
from numpyro_autospec.denoisers._point_cloud import PointCloudDenoiser
from numpyro_autospec.denoisers._validation import validate_denoiser

__all__ = [
    "Denoiser",
    "GaussianMixtureDenoiser",
    "PointCloudDenoiser",
    "digits_point_cloud",
    "validate_denoiser",
]
