"""Exact and learned-like any-order oracles and their validation."""

from numpyro_autospec.oracles.base import AnyOrderOracle
from numpyro_autospec.oracles.curie_weiss import CurieWeissOracle
from numpyro_autospec.oracles.hopfield import HopfieldOracle
from numpyro_autospec.oracles.ising_chain import IsingChainOracle
from numpyro_autospec.oracles.perturbed import PerturbedOracle
from numpyro_autospec.oracles.table import TableOracle
from numpyro_autospec.oracles.validation import OracleError, validate_oracle

__all__ = [
    "AnyOrderOracle",
    "CurieWeissOracle",
    "HopfieldOracle",
    "IsingChainOracle",
    "OracleError",
    "PerturbedOracle",
    "TableOracle",
    "validate_oracle",
]
