"""numpyro-autospec: exact parallel sampling via autospeculation for NumPyro.

Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025): recursive
speculative rejection sampling draws exactly from an any-order autoregressive model or a
denoising diffusion in :math:`\\tilde O(\\sqrt n)` rounds of oracle calls instead of :math:`n`.
Entry points: :class:`AutospecKernel` (exact independent draws as a NumPyro ``MCMCKernel``),
:class:`AutospecGibbs` (the oracle sites as a block of NUTS/HMC-within-Gibbs), the distributions
:class:`AnyOrderAR` and :class:`StochasticLocalization`, :class:`SamplerConfig` (the knobs) and
:class:`AutospecError` (the base of every error raised on bad input).
"""

from numpyro_autospec.config import Capacity, SamplerConfig
from numpyro_autospec.engine._run import Samples, run
from numpyro_autospec.errors import (
    AutospecError,
    ConfigError,
    DenoiserError,
    InputError,
    OracleError,
    UnsupportedModelError,
)
from numpyro_autospec.infer import AnyOrderAR, AutospecGibbs, AutospecKernel, StochasticLocalization

__all__ = [
    "AnyOrderAR",
    "AutospecError",
    "AutospecGibbs",
    "AutospecKernel",
    "Capacity",
    "ConfigError",
    "DenoiserError",
    "InputError",
    "OracleError",
    "SamplerConfig",
    "Samples",
    "StochasticLocalization",
    "UnsupportedModelError",
    "run",
]
