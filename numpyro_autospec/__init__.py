"""numpyro-autospec: exact parallel sampling via autospeculation for NumPyro.

Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025): recursive
speculative rejection sampling draws exactly from an any-order autoregressive model or a
denoising diffusion in :math:`\\tilde O(\\sqrt n)` rounds of oracle calls instead of
:math:`n`.  The main entry points:

* :class:`AutospecKernel` -- a NumPyro ``MCMCKernel`` returning exact independent draws;
* :class:`AutospecGibbs` -- posterior inference: exact draws of the oracle sites as a block of
  NUTS/HMC-within-Gibbs (:mod:`numpyro_autospec.infer._gibbs`);
* :class:`AnyOrderAR`, :class:`StochasticLocalization` -- distributions carrying an oracle;
* :class:`SamplerConfig` -- the engine's knobs (none of them changes the law);
* :class:`AutospecError` -- the base of every error the package raises on bad input
  (:mod:`numpyro_autospec.errors`).
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
