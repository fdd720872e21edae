"""NumPyro integration: oracle-carrying distributions and the ``AutospecKernel`` MCMC kernel."""

from numpyro_autospec.numpyro.distributions import (
    AnyOrderAR,
    OracleDistribution,
    StochasticLocalization,
)
from numpyro_autospec.numpyro.kernel import (
    AutospecKernel,
    AutospecState,
    ModelInspection,
    UnsupportedModelError,
    autospec_step,
    draw_model,
    inspect_model,
)

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
