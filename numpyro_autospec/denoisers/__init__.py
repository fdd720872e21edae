"""Exact denoisers (oracles of the diffusion process) and checks of the denoiser contract."""

from numpyro_autospec.denoisers.base import Denoiser
from numpyro_autospec.denoisers.digits import DIGITS_MAX_PIXEL_VALUE, digits_point_cloud
from numpyro_autospec.denoisers.gaussian_mixture import GaussianMixtureDenoiser
from numpyro_autospec.denoisers.point_cloud import PointCloudDenoiser
from numpyro_autospec.denoisers.validation import (
    DEFECT_INFINITE,
    DEFECT_NAN,
    DEFECT_NONE,
    DEFECT_TIME,
    DenoiserError,
    TimeGridError,
    check_denoiser_signature,
    check_time_grid,
    denoiser_defect,
    raise_if_defect,
    validate_denoiser,
)

__all__ = [
    "DEFECT_INFINITE",
    "DEFECT_NAN",
    "DEFECT_NONE",
    "DEFECT_TIME",
    "DIGITS_MAX_PIXEL_VALUE",
    "Denoiser",
    "DenoiserError",
    "GaussianMixtureDenoiser",
    "PointCloudDenoiser",
    "TimeGridError",
    "check_denoiser_signature",
    "check_time_grid",
    "denoiser_defect",
    "digits_point_cloud",
    "raise_if_defect",
    "validate_denoiser",
]
