"""Any-order oracles: the protocol, exact targets, inconsistent learned-like models, validation.

Exact (consistent) oracles: :class:`TableOracle` (explicit joint, small :math:`n`),
:class:`CurieWeissOracle` (mean field, :math:`O(n)` per query), :class:`IsingChainOracle`
(forward-backward, :math:`O(n)` per query).  Inconsistent oracles, whose sampler law is that of
sequential any-order sampling: :class:`PerturbedOracle` (exact sequential law available) and
:class:`HopfieldOracle` (logistic, learned-like).

Curie-Weiss, the Ising chain and Hopfield also **score blocks** (``scores_blocks``): their
``log_conditionals`` answers all ``L`` rows of a block in one call -- Curie-Weiss from a
cumulative spin sum along the order, the chain from transfer-matrix messages between each
site's nearest pinned neighbours, Hopfield from cumulative pattern overlaps -- so a speculated
block costs the engine two oracle evaluations whatever its length (docs/benchmarks.md,
"Design decisions").  :func:`check_block_form` checks such a block form
against the set form.

Each class is a thin shell over a pure function of its parameters and the query
(``table_log_marginals``, ``curie_weiss_log_marginals``, ...): passing the parameters as
arguments lets ``jit`` compile once per shape rather than once per instance.
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
