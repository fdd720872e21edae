"""The round scheduler that runs autospeculation (and its peers) as one compiled program."""

from numpyro_autospec.engine.scheduler import Capacity, Samples, plan, run
from numpyro_autospec.engine.sharding import ShardingError

__all__ = ["Capacity", "Samples", "ShardingError", "plan", "run"]
