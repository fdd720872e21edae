"""The biased parallel samplers that autospeculation is compared with, on the same processes
and oracles and with the same cost accounting (:class:`~numpyro_autospec.engine.Samples`:
``rounds`` = sequential oracle calls, ``queries`` = oracle evaluations).

* :mod:`~benchmarks.baselines.maskgit`: MaskGIT-style decoding of an any-order process,
  ``k`` sites per round from the product of marginals (what masked diffusion language models
  ship): fast, biased.
* :mod:`~benchmarks.baselines.picard`: ParaDiGMS-style Picard iteration of the
  Euler-Maruyama chain of a diffusion process over a sliding window, with a tolerance: exact
  only as the tolerance goes to 0.

``benchmarks/alternatives.py`` measures both beside autospeculation and NumPyro's Gibbs
samplers (docs/benchmarks.md, "Alternatives side by side").
"""

from .maskgit import cosine_schedule, maskgit_draw, maskgit_run, uniform_schedule
from .picard import picard_draw, picard_run

__all__ = [
    "cosine_schedule",
    "maskgit_draw",
    "maskgit_run",
    "picard_draw",
    "picard_run",
    "uniform_schedule",
]
