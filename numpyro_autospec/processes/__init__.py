"""Processes: the oracle-driven sequences that the samplers run (ALGORITHM.md, section 2)."""

from numpyro_autospec.processes.any_order import AnyOrderProcess, AnyOrderState
from numpyro_autospec.processes.base import DiscreteStepProcess, Process

__all__ = ["AnyOrderProcess", "AnyOrderState", "DiscreteStepProcess", "Process"]
