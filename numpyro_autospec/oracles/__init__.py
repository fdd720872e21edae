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
"Oracle evaluations with block forms").  :func:`check_block_form` checks such a block form
against the set form.

Each class is a thin shell over a pure function of its parameters and the query
(``table_log_marginals``, ``curie_weiss_log_marginals``, ...): passing the parameters as
arguments lets ``jit`` compile once per shape rather than once per instance.
"""

from numpyro_autospec.oracles.base import (
    AnyOrderOracle,
    FunctionOracle,
    as_oracle,
    marginal_conditionals,
)
from numpyro_autospec.oracles.consistency import check_block_form, check_block_form_signature
from numpyro_autospec.oracles.curie_weiss import CurieWeissOracle, curie_weiss_log_marginals
from numpyro_autospec.oracles.hopfield import HopfieldOracle, hopfield_log_marginals
from numpyro_autospec.oracles.ising_chain import IsingChainOracle, ising_chain_log_marginals
from numpyro_autospec.oracles.perturbed import PerturbedOracle, perturbed_log_marginals
from numpyro_autospec.oracles.probes import validate_log_conditionals, validate_oracle
from numpyro_autospec.oracles.table import TableOracle, table_log_marginals
from numpyro_autospec.oracles.validation import (
    DEFECT_NAN,
    DEFECT_OK,
    DEFECT_POSINF,
    DEFECT_UNNORMALIZED,
    OracleDefect,
    OracleError,
    check_oracle_signature,
    check_order_and_observed,
    check_permutation,
    check_values_in_support,
    describe_defect,
    log_marginals_defect,
    raise_if_defect,
)

__all__ = [
    "DEFECT_NAN",
    "DEFECT_OK",
    "DEFECT_POSINF",
    "DEFECT_UNNORMALIZED",
    "AnyOrderOracle",
    "FunctionOracle",
    "as_oracle",
    "marginal_conditionals",
    "CurieWeissOracle",
    "HopfieldOracle",
    "IsingChainOracle",
    "OracleDefect",
    "OracleError",
    "PerturbedOracle",
    "TableOracle",
    "check_block_form",
    "check_block_form_signature",
    "check_oracle_signature",
    "check_order_and_observed",
    "check_permutation",
    "check_values_in_support",
    "curie_weiss_log_marginals",
    "describe_defect",
    "hopfield_log_marginals",
    "ising_chain_log_marginals",
    "log_marginals_defect",
    "perturbed_log_marginals",
    "raise_if_defect",
    "table_log_marginals",
    "validate_log_conditionals",
    "validate_oracle",
]
