"""Shared fixtures of the transformer-oracle tests: a random table on [3]^5, data drawn from
it, fresh two-stream transformers, and a tiny one trained on the data (cached: trained once
per test process, in seconds).

Nothing here is a test; the modules ``test_transformer*.py`` import it.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from numpyro_autospec.learned import TransformerOracle, train_transformer
from tests.tables import random_probabilities

N, Q = 5, 3
MODEL_SIZE = 16
NUM_STEPS = 250


def table_probs(seed: int = 0, concentration: float = 0.5) -> np.ndarray:
    """A random joint on [Q]^N, flat float64 ``[Q**N]`` in C order (site 0 most significant):
    :func:`tests.tables.random_probabilities`, the suite's one recipe."""
    return random_probabilities(seed, N, Q, concentration)


def table_data(seed: int = 0, num_examples: int = 4000) -> np.ndarray:
    """``num_examples`` iid draws from :func:`table_probs` as int32 ``[num_examples, N]``."""
    rng = np.random.default_rng(seed + 1000)
    codes = rng.choice(Q**N, size=num_examples, p=table_probs(seed))
    return np.stack(np.unravel_index(codes, (Q,) * N), axis=1).astype(np.int32)


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
