"""Random joint tables on :math:`[q]^n`, the exact answers of most goodness-of-fit tests.

Nothing here is a test.  One home for the table every exactness test draws from, so that a
change of the recipe (the Dirichlet concentration, the order of the cells) reaches them all.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from numpyro_autospec.oracles import TableOracle

#: the default size: n = 4 sites with q = 3 values, 81 cells
N, Q = 4, 3


def random_probabilities(seed: int, n: int = N, q: int = Q, concentration: float = 0.6):
    """A Dirichlet(``concentration``) joint on :math:`[q]^n`: float64 ``[q**n]``, C order
    (site 0 most significant, as :func:`tests.gof.encode_configurations` codes a draw)."""
    return np.random.default_rng(seed).dirichlet(np.full(q**n, concentration))


def random_table(seed: int, n: int = N, q: int = Q, concentration: float = 0.6) -> TableOracle:
    """The :class:`TableOracle` of :func:`random_probabilities`."""
    probabilities = random_probabilities(seed, n, q, concentration)
    return TableOracle(np.log(probabilities).reshape((q,) * n))


@dataclasses.dataclass(frozen=True)
class DrawnTable:
    """A random joint on :math:`[q]^n` (:func:`random_probabilities`) and iid draws from it:
    the data of the learned-oracle fixtures (``tests/learned/trained.py``,
    ``tests/learned/transformer_fixtures.py``)."""

    n: int
    q: int
    concentration: float
    num_examples: int

    def probabilities(self, seed: int = 0) -> np.ndarray:
        """The joint of ``seed``: float64 ``[q**n]`` in C order (site 0 most significant)."""
        return random_probabilities(seed, self.n, self.q, self.concentration)

    def draws(self, seed: int = 0, num_examples: int | None = None) -> np.ndarray:
        """``num_examples`` (default :attr:`num_examples`) iid draws from
        :meth:`probabilities` as int32 ``[num_examples, n]`` (generator seed ``seed + 1000``)."""
        num_examples = self.num_examples if num_examples is None else num_examples
        rng = np.random.default_rng(seed + 1000)
        codes = rng.choice(self.q**self.n, size=num_examples, p=self.probabilities(seed))
        return np.stack(np.unravel_index(codes, (self.q,) * self.n), axis=1).astype(np.int32)


def probabilities_of(log_probs) -> np.ndarray:
    """An exact law given by its log-probabilities ``[q] * n`` (``TableOracle.log_probs``,
    ``PerturbedOracle.sequential_log_probs``, ...) as float64 ``[q**n]`` in C order."""
    return np.exp(np.asarray(log_probs, np.float64)).ravel()
