"""numpyro-autospec: exact parallel sampling via autospeculation for NumPyro.

Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025): recursive
speculative rejection sampling draws exactly from an any-order autoregressive model or a
denoising diffusion in :math:`\\tilde O(\\sqrt n)` rounds of oracle calls instead of
:math:`n`.  The main entry points:

* :class:`AutospecKernel` -- a NumPyro ``MCMCKernel`` returning exact independent draws;
* :class:`AutospecGibbs` -- posterior inference: exact draws of the oracle sites as a block of
  NUTS/HMC-within-Gibbs (:mod:`numpyro_autospec.numpyro.gibbs`);
* :class:`AnyOrderAR`, :class:`StochasticLocalization` -- distributions carrying an oracle;
* :class:`SamplerConfig` -- the engine's knobs (none of them changes the law);
* :class:`AutospecError` -- the base of every error the package raises on bad input
  (:mod:`numpyro_autospec.exceptions`).
"""

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.exceptions import AutospecError
from numpyro_autospec.numpyro import (
    AnyOrderAR,
    AutospecGibbs,
    AutospecKernel,
    StochasticLocalization,
)

__all__ = [
    "AnyOrderAR",
    "AutospecError",
    "AutospecGibbs",
    "AutospecKernel",
    "SamplerConfig",
    "StochasticLocalization",
]
