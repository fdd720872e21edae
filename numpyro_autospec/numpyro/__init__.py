"""NumPyro integration: oracle-carrying distributions, the ``AutospecKernel`` MCMC kernel and the
``AutospecGibbs`` posterior sampler."""

from numpyro_autospec.numpyro.distributions import AnyOrderAR, OracleDistribution
from numpyro_autospec.numpyro.gibbs import AutospecGibbs, AutospecGibbsState
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
    "AutospecGibbs",
    "AutospecGibbsState",
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
