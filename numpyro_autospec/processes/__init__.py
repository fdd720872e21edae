"""Processes: the oracle-driven sequences that the samplers run (docs/algorithm.md, section 2)."""

from numpyro_autospec.processes._any_order import AnyOrderProcess
from numpyro_autospec.processes._base import BlockScoringProcess, DiscreteStepProcess, Process
from numpyro_autospec.processes._diffusion import DiffusionProcess
from numpyro_autospec.processes._time_grids import default_times, uniform_times

__all__ = [
    "AnyOrderProcess",
    "BlockScoringProcess",
    "DiffusionProcess",
    "DiscreteStepProcess",
    "Process",
    "default_times",
    "uniform_times",
]
