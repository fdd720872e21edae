"""The engine: exact draws of a process in rounds of batched oracle calls, as one compiled
loop (docs/algorithm.md, sections 3-4)."""

from numpyro_autospec.config import Capacity
from numpyro_autospec.engine._run import Samples, run
from numpyro_autospec.engine._sequential import sequential_run

__all__ = ["Capacity", "Samples", "run", "sequential_run"]
