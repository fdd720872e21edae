"""NumPyro integration: oracle-carrying distributions, the ``AutospecKernel`` MCMC kernel and the
``AutospecGibbs`` posterior sampler."""

from numpyro_autospec.infer._distributions import AnyOrderAR, OracleDistribution
from numpyro_autospec.infer._drawing import draw_model
from numpyro_autospec.infer._gibbs import AutospecGibbs
from numpyro_autospec.infer._inspection import ModelInspection, inspect_model
from numpyro_autospec.infer._kernel import AutospecKernel
from numpyro_autospec.infer._stochastic_localization import StochasticLocalization

__all__ = [
    "AnyOrderAR",
    "AutospecGibbs",
    "AutospecKernel",
    "ModelInspection",
    "OracleDistribution",
    "StochasticLocalization",
    "draw_model",
    "inspect_model",
]
