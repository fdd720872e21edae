"""The engine: exact draws of a process in rounds of batched oracle calls, as one compiled
loop (docs/algorithm.md, sections 3-4)."""

from numpyro_autospec.engine._plan import Capacity
from numpyro_autospec.engine._run import Samples, run
from numpyro_autospec.engine.sharding import ShardingError

__all__ = ["Capacity", "Samples", "ShardingError", "run"]
