"""Any-order oracles: the protocol, exact targets, inconsistent learned-like models, validation.

Exact oracles: :class:`TableOracle` (explicit joint, small :math:`n`), :class:`CurieWeissOracle`
(mean field) and :class:`IsingChainOracle` (forward-backward), both :math:`O(n)` per query.
Inconsistent oracles, whose sampler law is that of sequential any-order sampling:
:class:`PerturbedOracle` (exact sequential law available) and :class:`HopfieldOracle` (logistic,
learned-like).  Curie-Weiss, the Ising chain and Hopfield **score blocks**: ``log_conditionals``
answers all ``L`` rows of a block in one call, so a speculated block costs two oracle evaluations
whatever its length; :func:`check_block_form` checks a block form against the set form.
"""

from numpyro_autospec.oracles._base import AnyOrderOracle, FunctionOracle, as_oracle
from numpyro_autospec.oracles._consistency import check_block_form
from numpyro_autospec.oracles._curie_weiss import CurieWeissOracle
from numpyro_autospec.oracles._hopfield import HopfieldOracle
from numpyro_autospec.oracles._ising_chain import IsingChainOracle
from numpyro_autospec.oracles._perturbed import PerturbedOracle
from numpyro_autospec.oracles._probes import validate_oracle
from numpyro_autospec.oracles._table import TableOracle

__all__ = [
    "AnyOrderOracle",
    "CurieWeissOracle",
    "FunctionOracle",
    "HopfieldOracle",
    "IsingChainOracle",
    "PerturbedOracle",
    "TableOracle",
    "as_oracle",
    "check_block_form",
    "validate_oracle",
]
