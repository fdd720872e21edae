"""NumPyro integration: oracle-carrying distributions and the ``AutospecKernel`` MCMC kernel."""

from numpyro_autospec.numpyro.distributions import AnyOrderAR, OracleDistribution
from numpyro_autospec.numpyro.kernel import (
    AutospecKernel,
    AutospecState,
    ModelInspection,
    UnsupportedModelError,
    autospec_step,
    draw_model,
    inspect_model,
)
from numpyro_autospec.numpyro.stochastic_localization import StochasticLocalization

__all__ = [
    "AnyOrderAR",
    "AutospecKernel",
    "AutospecState",
    "ModelInspection",
    "OracleDistribution",
    "StochasticLocalization",
    "UnsupportedModelError",
    "autospec_step",
    "draw_model",
    "inspect_model",
]
