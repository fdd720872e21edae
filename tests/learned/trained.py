"""Shared fixtures of the learned-oracle tests: a random table on [3]^4, data drawn from it,
and a small network trained on them (cached: trained once per test process).

Nothing here is a test; the modules ``test_*.py`` import it.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from numpyro_autospec.learned import LearnedOracle, MaskedMLP
from tests.tables import DrawnTable

from support.training import fit

N, Q = 4, 3
HIDDEN_SIZE = 16
NUM_STEPS = 300
#: the table and its data: ``table_probs(seed)``, and ``table_data(seed, num_examples)``
TABLE = DrawnTable(N, Q, concentration=0.6, num_examples=2000)
table_probs, table_data = TABLE.probabilities, TABLE.draws


def fresh_network(seed: int = 0, hidden_size: int = HIDDEN_SIZE) -> MaskedMLP:
    return MaskedMLP(N, Q, hidden_size=hidden_size, key=jax.random.PRNGKey(seed))


@functools.cache
def trained(seed: int = 0) -> tuple[MaskedMLP, np.ndarray]:
    """``(network, losses)``: :func:`fresh_network` after ``NUM_STEPS`` Adam steps on
    :func:`table_data` (batch 64, learning rate 1e-2)."""
    return fit(
        jax.random.PRNGKey(seed + 1),
        fresh_network(seed),
        table_data(seed),
        NUM_STEPS,
        batch_size=64,
        learning_rate=1e-2,
    )


def trained_oracle(seed: int = 0) -> LearnedOracle:
    return LearnedOracle(trained(seed)[0])


def all_masks(n: int = N) -> np.ndarray:
    """All ``2**n`` masks, bool ``[2**n, n]`` (row ``c`` pins the sites of the bits of ``c``)."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1) == 1
