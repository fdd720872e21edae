"""Shared fixtures of the transformer-oracle tests: a random table on [3]^5, data drawn from
it, fresh two-stream transformers, and a tiny one trained on the data (cached: trained once
per test process, in seconds).

Nothing here is a test; the modules ``test_transformer*.py`` import it.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from numpyro_autospec.learned import TransformerOracle
from tests.tables import DrawnTable

from support.transformer_training import train_transformer

N, Q = 5, 3
MODEL_SIZE = 16
NUM_STEPS = 250
#: the table and its data: ``table_probs(seed)``, and ``table_data(seed, num_examples)``
TABLE = DrawnTable(N, Q, concentration=0.5, num_examples=4000)
table_probs, table_data = TABLE.probabilities, TABLE.draws


def fresh_transformer(
    seed: int = 0, num_layers: int = 2, n: int = N, q: int = Q, model_size: int = MODEL_SIZE
) -> TransformerOracle:
    """An untrained transformer (random weights: conditionals far from uniform, order-aware)."""
    return TransformerOracle(
        n,
        q,
        model_size=model_size,
        num_layers=num_layers,
        num_heads=2,
        key=jax.random.PRNGKey(seed),
    )


@functools.cache
def trained(seed: int = 0) -> tuple[TransformerOracle, np.ndarray]:
    """``(transformer, losses)``: one layer of width 16 after ``NUM_STEPS`` AdamW steps on
    :func:`table_data` (batch 64, learning rate 1e-2, random-order objective)."""
    return train_transformer(
        jax.random.PRNGKey(seed + 1),
        fresh_transformer(seed, num_layers=1),
        table_data(seed),
        NUM_STEPS,
        batch_size=64,
        learning_rate=1e-2,
        progress_bar=False,
    )


def trained_transformer(seed: int = 0) -> TransformerOracle:
    return trained(seed)[0]
