"""Processes: the oracle-driven sequences that the samplers run (docs/algorithm.md, section 2)."""

from numpyro_autospec.processes.any_order import AnyOrderProcess, AnyOrderState
from numpyro_autospec.processes.base import (
    BlockScoringProcess,
    BoundedSpeculationProcess,
    DiscreteStepProcess,
    Process,
)
from numpyro_autospec.processes.diffusion import DiffusionProcess, DiffusionState
from numpyro_autospec.processes.time_grids import default_times, uniform_times

__all__ = [
    "AnyOrderProcess",
    "AnyOrderState",
    "BlockScoringProcess",
    "BoundedSpeculationProcess",
    "DiffusionProcess",
    "DiffusionState",
    "DiscreteStepProcess",
    "Process",
    "default_times",
    "uniform_times",
]
